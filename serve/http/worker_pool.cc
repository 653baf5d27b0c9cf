#include "serve/http/worker_pool.h"

namespace ingero::serve::http {

WorkerPool::WorkerPool(size_t threads, size_t max_queued, std::function<void()> on_start)
    : max_queued_(max_queued) {
  if (threads == 0) threads = 1;
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this, on_start] {
      if (on_start) on_start();
      work();
    });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::try_submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> g(mu_);
    // Jobs that idle workers are about to take do not count against the queue.
    size_t idle = threads_.size() - busy_;
    if (stopping_ || q_.size() >= max_queued_ + idle) return false;
    q_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

size_t WorkerPool::drop_queued() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> g(mu_);
    dropped.swap(q_);
  }
  return dropped.size();  // destroyed here, outside the lock
}

size_t WorkerPool::busy() const {
  std::lock_guard<std::mutex> g(mu_);
  return busy_;
}

size_t WorkerPool::queued() const {
  std::lock_guard<std::mutex> g(mu_);
  return q_.size();
}

void WorkerPool::work() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [&] { return stopping_ || !q_.empty(); });
    if (q_.empty()) return;  // stopping, and nothing left to run
    auto job = std::move(q_.front());
    q_.pop_front();
    ++busy_;
    l.unlock();
    job();
    job = nullptr;  // release captures outside the lock
    l.lock();
    --busy_;
  }
}

}  // namespace ingero::serve::http
