// Closes BPF links on a thread of its own. Closing a uprobe link waits for the kernel's RCU
// grace periods: 30-150 ms each on a 6.18 kernel. The tracer's reader must not wait that long
// while a program launches a million kernels a second into an 8 MiB ring, which fills in
// ~40 ms (bench/launch_cost.sh lost 20,000 launches of 300,000 to one such close).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "probe/bpf_session.h"

namespace ingero::hal {

// Closes `links` now, on up to `threads` threads at once, the caller's included (alone where no
// other can be started): each close mostly waits for a grace period, which closes made together
// share. The session's end detached its ~13 links one after another in 0.6-0.9 s of wall time on
// this VM.
void close_links(std::vector<Link> links, size_t threads = 16);

class LinkCloser {
 public:
  LinkCloser() = default;
  ~LinkCloser();  // finishes every close queued, then stops
  LinkCloser(const LinkCloser&) = delete;
  LinkCloser& operator=(const LinkCloser&) = delete;

  // Closes `links`, in order, then runs `then` on the closing thread (on the caller's, before
  // it returns, where no thread can be started).
  void close(std::vector<Link> links, std::function<void()> then = {});
  // Returns once every close queued so far, and its `then`, has finished.
  void wait();

 private:
  struct Job {
    std::vector<Link> links;
    std::function<void()> then;
  };
  void run();

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Job> jobs_;
  bool working_ = false;
  bool stop_ = false;
  std::thread thread_;  // started by the first close
};

}  // namespace ingero::hal
