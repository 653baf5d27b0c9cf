// Closes BPF links (and attaches a launch timing window's) on a thread of its own. Closing a uprobe
// link waits for the kernel's RCU grace periods: 30-150 ms each on a 6.18 kernel. The tracer's
// reader must not wait that long while a program launches a million kernels a second into an 8 MiB
// ring, which fills in ~40 ms (bench/launch_cost.sh lost 20,000 launches of 300,000 to one such
// close).
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "probe/bpf_session.h"

namespace ingero::hal {

// Closes `links` now, on up to `threads` threads at once, the caller's included (alone where no
// other can be started): each close mostly waits for a grace period, which closes made together
// share. The session's end detached its ~13 links one after another in 0.6-0.9 s of wall time on
// this VM.
void close_links(std::vector<Link> links, size_t threads = 16);

// Perf-event uprobes (the perf pair's, on kernels before 6.6; the loaders' and the self-test's
// everywhere) go one at a time: the last close of each takes the kernel's event_mutex and holds
// it over the grace periods that free the probe (perf_uprobe_destroy,
// tracepoint_synchronize_unregister), ~120 ms a probe on this VM's 6.18. Closing them together
// does not help: 389 took 45 s at the end of a session.
//
// hand_off_perf_events() starts a process that holds a reference to every perf event of this
// one, runs `close_here` (the caller's own closes, then not the last: they detach the programs
// and return at once), and lets the process go: it exits, and the kernel frees the events as it
// does. Until each is freed, a call of its function still stops at its breakpoint, where nothing
// of ingero runs any more. The process keeps no other file (no pipe end of the caller's, no
// terminal, trace file or socket), so no reader of the caller's output waits for it, and it is
// not the caller's child. Where it cannot be started, `close_here` closes them here, as before.
struct HandOff {
  pid_t pid = -1;          // the process that frees them; -1: none
  size_t perf_events = 0;  // the perf events it holds
  std::string error;       // why none was started
};
HandOff hand_off_perf_events(const std::function<void()>& close_here);
// From how many perf-event links a close hands off rather than waits (~1 s of closes here).
constexpr size_t kHandOffPerfLinks = 8;

class LinkCloser {
 public:
  LinkCloser() = default;
  ~LinkCloser();  // finishes every close queued, then stops
  LinkCloser(const LinkCloser&) = delete;
  LinkCloser& operator=(const LinkCloser&) = delete;

  // Closes `links`, in order, then runs `then` on the closing thread (on the caller's, before
  // it returns, where no thread can be started).
  void close(std::vector<Link> links, std::function<void()> then = {});
  // Runs `job` on the closing thread, after the closes queued before it: what may wait for the
  // kernel as long as a close (attaching perf-event uprobes waits for the frees of others).
  void run(std::function<void()> job) { close({}, std::move(job)); }
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
