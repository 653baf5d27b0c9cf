// Threads stuck now: the vocabulary of calls in flight, shared by capture (which finds them in
// the BPF thread table once a second), the sinks (the store's `inflight` table, Prometheus),
// and the sources and engine that read them back.
//
// Times are in the clock of whoever made the value, as for Event::ts_ns: CLOCK_MONOTONIC from
// capture, wall-clock Unix ns once stored and read back.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "hal/event.h"

namespace ingero::hal {

// What a thread is doing now, from the scheduler's data (the last switch the tracer saw) or,
// without it, /proc.
enum class ThreadState : uint8_t {
  kUnknown = 0,
  kRunning,   // on a CPU
  kRunnable,  // preempted: ready, waiting for a CPU
  kSleeping,  // waiting for an event (a futex, a pipe, a timer)
  kIo,        // uninterruptible sleep (D): disk or device I/O, a page fault
  kExited,
  kStopped,  // stopped (T, t): by a signal (SIGSTOP, ^Z) or a debugger holding it (ptrace)
};
std::string_view thread_state_name(ThreadState s);  // "on-CPU", "runnable", "sleeping", ...
std::optional<ThreadState> thread_state_from_name(std::string_view name);

inline constexpr uint64_t kNoSeq = UINT64_MAX;

// One stuck thread: inside a traced call for longer than the tracer's --inflight-after (a
// `call`), or a thread that issues its process's collectives and has made no traced call for
// that long (`idle`: a rank that never reached the collective its peers wait in).
struct Inflight {
  enum class What : uint8_t { kCall, kIdle };
  // in_flight while it lasts; then returned (an idle thread: it made a traced call again),
  // unfinished (its thread exited inside the call), or stopped (the tracer stopped first).
  enum class Status : uint8_t { kInFlight, kReturned, kUnfinished, kStopped };
  What what = What::kCall;
  Status status = Status::kInFlight;
  // pid, tid, comm; vendor, api, kind, op and the arguments decoded at entry (a call); ts_ns:
  // its entry (a call), the end of the thread's last traced call (idle); dur_ns: how long so
  // far, as of seen_ns. An idle thread carries its collectives' communicator, rank, nranks
  // and comm_hash in the fields.
  Event call;
  uint64_t reported_ns = 0;  // when the tracer first reported it
  uint64_t seen_ns = 0;      // when it was last seen so
  uint64_t ended_ns = 0;     // when it stopped being stuck (0 while it lasts)
  ThreadState state = ThreadState::kUnknown;
  uint64_t state_since_ns = 0;  // in that state since (0: unknown)
  // Its stack: a call's from its entry (the return address and the caller's frames) with the
  // thread's Python frames; an idle thread's Python frames. 0: none.
  uint64_t stack_id = 0;
  // A collective: its sequence number on its communicator (the collectives the process had
  // completed on it since its init); idle: the collectives completed. kNoSeq: not a
  // collective, or its communicator's init was not seen.
  uint64_t seq = kNoSeq;
  // The other threads of its process, by state now.
  uint32_t others_running = 0, others_sleeping = 0, others_io = 0;
};
std::string_view inflight_what_name(Inflight::What w);      // "call", "idle"
std::string_view inflight_status_name(Inflight::Status s);  // "in_flight", "returned", ...
std::optional<Inflight::What> inflight_what_from_name(std::string_view name);
std::optional<Inflight::Status> inflight_status_from_name(std::string_view name);

// What capture reports once a second.
struct InflightReport {
  uint64_t now_ns = 0;
  uint64_t after_ns = 0;  // the threshold (--inflight-after)
  // Every thread stuck now. `changed[i]`: current[i] is new, changed (state, stack) or due for
  // its periodic refresh: the store writes a row for it.
  std::vector<Inflight> current;
  std::vector<bool> changed;
  // Those that stopped being stuck since the last report, with their final status.
  std::vector<Inflight> ended;
};

}  // namespace ingero::hal
