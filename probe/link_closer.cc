#include "probe/link_closer.h"

#include <algorithm>
#include <atomic>

namespace ingero::hal {

void close_links(std::vector<Link> links, size_t threads) {
  size_t n = std::min(threads, links.size());
  if (n <= 1) {
    links.clear();
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (size_t t = 0; t < n; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < links.size();) links[i] = Link{};
    });
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
    jobs_.push_back({std::move(links), std::move(then)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_all();
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
