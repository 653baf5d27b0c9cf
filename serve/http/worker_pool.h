// A fixed set of threads with a bounded queue: where handlers that may block run (an MCP tool
// call can take seconds), so that the I/O thread never waits for them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ingero::serve::http {

class WorkerPool {
 public:
  // `threads` >= 1 workers; at most `max_queued` jobs wait for one. Each thread runs
  // `on_start` first, when given (its priority).
  WorkerPool(size_t threads, size_t max_queued, std::function<void()> on_start = {});
  ~WorkerPool();  // stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `job` unless the queue is full or the pool is stopped; never blocks.
  bool try_submit(std::function<void()> job);
  // Runs what is queued, waits for the running jobs, joins the threads. Idempotent.
  void stop();
  // Drops the jobs not yet started (their captures released); returns how many.
  size_t drop_queued();

  size_t busy() const;    // jobs running now
  size_t queued() const;  // jobs waiting

 private:
  void work();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  size_t max_queued_, busy_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ingero::serve::http
