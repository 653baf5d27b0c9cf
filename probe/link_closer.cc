#include "probe/link_closer.h"

#include <algorithm>
#include <atomic>
#include <system_error>

namespace ingero::hal {

void close_links(std::vector<Link> links, size_t threads) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < links.size();) links[i] = Link{};
  };
  // The caller closes links too; a thread that cannot be started leaves its share to it.
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min(threads, links.size()); ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (auto& t : pool) t.join();
}

LinkCloser::~LinkCloser() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LinkCloser::close(std::vector<Link> links, std::function<void()> then) {
  {
    std::lock_guard lk(mu_);
    bool started = thread_.joinable();
    if (!started) {
      try {
        thread_ = std::thread([this] { run(); });
        started = true;
      } catch (const std::system_error&) {
      }
    }
    if (started) {
      jobs_.push_back({std::move(links), std::move(then)});
      wake_.notify_all();
      return;
    }
  }
  // No thread could be started: the caller waits for the close, as it did before there was one.
  links.clear();
  if (then) then();
}

void LinkCloser::wait() {
  std::unique_lock lk(mu_);
  idle_.wait(lk, [this] { return jobs_.empty() && !working_; });
}

void LinkCloser::run() {
  std::unique_lock lk(mu_);
  while (true) {
    wake_.wait(lk, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left to close
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    working_ = true;
    lk.unlock();
    job.links.clear();
    if (job.then) job.then();
    job = {};
    lk.lock();
    working_ = false;
    idle_.notify_all();
  }
}

}  // namespace ingero::hal
