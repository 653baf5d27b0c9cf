#include "serve/http/stream.h"

#include "serve/http/stream_link.h"

namespace ingero::serve::http {

bool Stream::write(std::string_view data) {
  if (data.empty()) return open();
  std::unique_lock<std::mutex> l(mu_);
  if (ended_ || finished_) return false;
  bool room =
      space_.wait_for(l, write_timeout_, [&] { return ended_ || queued_bytes_ < max_buffered_; });
  if (ended_) return false;
  if (!room) {
    l.unlock();
    detail::StreamLink::end(*this);  // the connection sees ended_ and closes
    return false;
  }
  queue_.emplace_back(data);
  queued_bytes_ += data.size();
  auto wake = wake_;
  l.unlock();
  if (wake) wake();
  return true;
}

void Stream::close() {
  std::unique_lock<std::mutex> l(mu_);
  if (finished_ || ended_) return;
  finished_ = true;
  auto wake = wake_;
  l.unlock();
  if (wake) wake();
}

bool Stream::open() const {
  std::lock_guard<std::mutex> g(mu_);
  return !ended_;
}

void Stream::on_close(std::function<void()> f) {
  std::unique_lock<std::mutex> l(mu_);
  if (!ended_) {
    on_close_.push_back(std::move(f));
    return;
  }
  l.unlock();
  f();
}

namespace detail {

void StreamLink::attach(Stream& s, size_t max_buffered, std::chrono::milliseconds write_timeout,
                        std::function<void()> wake) {
  std::unique_lock<std::mutex> l(s.mu_);
  s.max_buffered_ = max_buffered;
  s.write_timeout_ = write_timeout;
  s.wake_ = std::move(wake);
  bool pending = !s.queue_.empty() || s.finished_ || s.ended_;
  auto w = s.wake_;
  l.unlock();
  s.space_.notify_all();  // the limit may have grown
  if (pending) w();
}

bool StreamLink::take(Stream& s, std::string& out, size_t max_bytes) {
  std::unique_lock<std::mutex> l(s.mu_);
  size_t taken = 0;
  while (!s.queue_.empty() && (taken == 0 || taken + s.queue_.front().size() <= max_bytes)) {
    taken += s.queue_.front().size();
    out += s.queue_.front();
    s.queue_.pop_front();
  }
  s.queued_bytes_ -= taken;
  bool done = s.finished_ && s.queue_.empty();
  l.unlock();
  if (taken) s.space_.notify_all();
  return done;
}

bool StreamLink::ended(const Stream& s) {
  std::lock_guard<std::mutex> g(s.mu_);
  return s.ended_;
}

void StreamLink::end(Stream& s) {
  std::unique_lock<std::mutex> l(s.mu_);
  if (s.ended_) return;
  s.ended_ = true;
  s.queue_.clear();
  s.queued_bytes_ = 0;
  auto callbacks = std::move(s.on_close_);
  s.on_close_.clear();
  auto wake = std::move(s.wake_);  // the connection learns of a writer's timeout this way
  s.wake_ = nullptr;
  l.unlock();
  s.space_.notify_all();
  if (wake) wake();
  for (auto& f : callbacks) f();
}

}  // namespace detail
}  // namespace ingero::serve::http
