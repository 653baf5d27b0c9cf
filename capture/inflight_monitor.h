// Calls in flight, live. A call is stored when it returns; a call that hangs never does, so
// while a job hangs the trace would hold nothing about it. Once a second the tracer reads the
// BPF thread table (the frame of every thread inside a traced call, bpf/calls.bpf.c's
// ingero_inflight iterator) and reports, to the sinks (hal::EventSink::on_inflight):
//   - every traced call in flight for longer than --inflight-after: pid, tid, op, entry time,
//     the arguments decoded at entry (stream, communicator, count, peer, ...), its stack (its
//     return address and the caller's frames, kept at entry, with the thread's Python frames,
//     read from the process now), the thread's state now (on-CPU, runnable, sleeping, in I/O,
//     from the scheduler's data, else /proc) and the states of its process's other threads;
//   - every thread that issues its process's collectives (a rank's thread) and has made no
//     traced call for that long, with its state and Python frames: a rank that never reached
//     the collective its peers wait in shows where it is instead.
// A collective carries its sequence number on its communicator, numbered as the engine
// numbers them (engine/fleet.h): the collectives the process completed on it since its init.
// When a call returns it ends as `returned` (the call itself is stored as usual); when its
// thread exits inside it, `unfinished`; what is stuck when the tracer stops ends `stopped`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/communicator_join.h"
#include "hal/event_sink.h"
#include "hal/inflight.h"
#include "hal/result.h"
#include "ingero_records.h"
#include "probe/bpf_session.h"
#include "probe/record_decoder.h"

namespace ingero::capture {

class StackCollector;

class InflightMonitor {
 public:
  // What the monitor reads: one implementation over the BPF session and /proc
  // (capture/inflight_host.h), and test doubles.
  class Host {
   public:
    virtual ~Host() = default;
    // The frames of the threads inside a traced call now (hal::BpfSession::read_inflight).
    virtual Status frames(std::vector<ingero_inflight_rec>& out) = 0;
    // The scheduler's last record of a thread (hal::BpfSession::thread_sched).
    virtual std::optional<hal::ThreadSched> sched(uint32_t tid) = 0;
    // The state letter of /proc/PID/task/TID/stat ('R', 'S', 'D', ...); 0: the thread is gone.
    virtual char proc_state(uint32_t pid, uint32_t tid) = 0;
    // The threads of a process (/proc/PID/task); empty when it is gone.
    virtual std::vector<uint32_t> threads(uint32_t pid) = 0;
    // The stack pointer of a thread blocked in a system call (/proc/PID/task/TID/syscall);
    // 0 when it runs, or is not known.
    virtual uint64_t blocked_sp(uint32_t pid, uint32_t tid) = 0;
    virtual std::string comm(uint32_t pid, uint32_t tid) = 0;
    // The thread's PyThreadState as BPF cached it (0: unknown).
    virtual uint64_t py_tstate(uint32_t tid) = 0;
  };

  struct Options {
    uint64_t after_ns = 5'000'000'000;    // --inflight-after
    uint64_t refresh_ns = 5'000'000'000;  // a stuck thread's row is rewritten at least this often
  };

  struct Counters {
    uint64_t ticks = 0;
    uint64_t read_errors = 0;  // frame reads that failed
    uint64_t frames = 0;       // frames read (threads inside a call at a tick)
    uint64_t reported = 0;     // calls reported in flight (each once)
    uint64_t idle = 0;         // rank threads reported idle (each episode once)
    uint64_t stale = 0;        // frames whose call had unwound without returning
    uint64_t undecoded = 0;    // frames of a probe id the table does not know
    uint64_t event_waits = 0;  // calls that wait for device events by design (never reported)
    uint64_t cpu_ns = 0;       // the monitor's own CPU time (reads included)
  };

  InflightMonitor(const hal::CallDecoder& decoder, Host& host, hal::EventSink& out,
                  Options options);

  // Reads stacks of stuck threads from their processes (null: rows carry no stack).
  StackCollector* stacks = nullptr;
  // A failed read of the frames, once per distinct message.
  std::function<void(const std::string&)> on_warning;

  // Every decoded call, in ring order (the pipeline's): counts collectives per communicator,
  // keeps the last traced call of the threads that issue collectives, and ends a reported
  // call that returned, with its real end. Cheap for calls of no interest.
  void note_call(const hal::Event& ev);
  // Reads the frames and reports to the sinks. `now_ns`: CLOCK_MONOTONIC.
  void tick(uint64_t now_ns);
  // The tracer stops: everything still stuck is reported once more, ended as `stopped`.
  void stop(uint64_t now_ns);
  const Counters& counters() const { return counters_; }
  const Options& options() const { return options_; }

 private:
  struct CommState {
    hal::CommunicatorInit init;
    uint64_t completed = 0;  // its collectives that returned
  };
  struct RankThread {
    uint32_t pid = 0;
    uint64_t last_end = 0;      // the end of its last traced call
    uint64_t communicator = 0;  // of its last collective
  };
  struct Tracked {
    hal::Inflight row;
    uint64_t written_ns = 0;   // when its row was last reported changed
    uint64_t returned_ns = 0;  // its call's end, from the call itself (note_call)
    bool unfinished = false;
    bool seen = false;  // at this tick
    // A wait for device events (ibv_get_async_event): blocked by design, for as long as the
    // job runs, on every NCCL-over-IB rank. Tracked, never reported stuck.
    bool waits_for_events = false;
  };
  using Key = std::pair<uint32_t, uint64_t>;  // (tid, entry) of a call; (tid, 0) idle
  // An init, a collective or a destroy: its communicator's state, and whether its thread is a
  // rank's to watch.
  void note_communicator(const hal::Event& ev);
  void track_call(const ingero_inflight_rec& r, uint64_t now, hal::InflightReport& report);
  void track_idle(uint32_t tid, const RankThread& rt, uint64_t now, hal::InflightReport& report);
  hal::ThreadState state_of(uint32_t pid, uint32_t tid, std::optional<hal::ThreadSched> s,
                            uint64_t* since);
  void count_others(hal::Inflight& row);
  void set_collective(hal::Event& ev, uint64_t* seq) const;
  void finish(Tracked& t, uint64_t now, hal::InflightReport& report, bool stopping);

  const hal::CallDecoder& decoder_;
  Host& host_;
  hal::EventSink& out_;
  Options options_;
  std::map<std::pair<uint32_t, uint64_t>, CommState> comms_;  // (pid, communicator)
  std::unordered_map<uint32_t, RankThread> rank_threads_;     // by tid
  std::map<Key, Tracked> tracked_;
  std::vector<ingero_inflight_rec> frames_;
  // The states of the threads of each process count_others looked at, this tick.
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, hal::ThreadState>>> tick_threads_;
  std::string last_warning_;
  Counters counters_;
};

}  // namespace ingero::capture
