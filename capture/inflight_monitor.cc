#include "capture/inflight_monitor.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "capture/stack_collector.h"

namespace ingero::capture {
namespace {

constexpr uint32_t kTaskUninterruptible = 0x2, kTaskNoload = 0x400;
// __TASK_STOPPED and __TASK_TRACED (include/linux/sched.h): stopped by a signal, or by a tracer.
constexpr uint32_t kTaskStopped = 0x4, kTaskTraced = 0x8;

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ULL + uint64_t(ts.tv_nsec);
}

// The frame as the call record its return would have carried, less what only the return
// knows: the decoder then reads its arguments as it reads any call's.
hal::CallRecord as_record(const ingero_inflight_rec& r) {
  hal::CallRecord rec;
  rec.hdr.type = INGERO_REC_CALL;
  rec.hdr.probe_id = r.probe_id;
  rec.hdr.pid = r.pid;
  rec.hdr.tid = r.tid;
  rec.hdr.start_ns = r.start_ns;
  rec.hdr.flags =
      uint16_t(INGERO_CALL_ENTRY_ONLY |
               (r.frame_flags & (INGERO_CALL_ENTRY_READ_FAULT | INGERO_CALL_STACK_READ_FAULT)));
  rec.hdr.nregs = std::min<uint8_t>(r.nregs, INGERO_REG_WORDS);
  rec.hdr.nstack = std::min<uint8_t>(r.nstack, INGERO_STACK_WORDS);
  rec.hdr.entry_len = std::min<uint16_t>(r.entry_len, INGERO_ENTRY_READ_MAX);
  rec.hdr.nested = r.nested;
  rec.hdr.nested_probe = r.nested_probe;
  std::memcpy(rec.regs, r.regs, sizeof(rec.regs));
  std::memcpy(rec.stack, r.stack, sizeof(rec.stack));
  std::memcpy(rec.entry_buf, r.entry_buf, sizeof(rec.entry_buf));
  return rec;
}

}  // namespace

InflightMonitor::InflightMonitor(const hal::CallDecoder& decoder, Host& host, hal::EventSink& out,
                                 Options options)
    : decoder_(decoder), host_(host), out_(out), options_(options) {}

void InflightMonitor::note_call(const hal::Event& ev) {
  if (ev.kind == hal::EventKind::kCommInit || ev.kind == hal::EventKind::kCollective ||
      ev.kind == hal::EventKind::kCommDestroy)
    note_communicator(ev);
  if (!rank_threads_.empty()) {
    auto it = rank_threads_.find(ev.tid);
    if (it != rank_threads_.end())
      it->second.last_end = std::max(it->second.last_end, ev.ts_ns + ev.dur_ns);
  }
  if (!tracked_.empty()) {
    auto it = tracked_.find({ev.tid, ev.ts_ns});
    if (it != tracked_.end() && it->second.row.what == hal::Inflight::What::kCall) {
      it->second.returned_ns = ev.ts_ns + ev.dur_ns;
      it->second.unfinished = ev.unfinished;
    }
  }
}

void InflightMonitor::note_communicator(const hal::Event& ev) {
  const uint64_t comm = ev.get_or(hal::Field::kCommunicator, 0);
  // A rank's thread is watched from its communicator's init: a rank that never reaches the
  // first collective its peers wait in is the classic hang, and it was in no row. A
  // communicator of one rank has no peer to keep waiting.
  auto watch = [&](uint64_t nranks) {
    if (nranks == 1) return;
    RankThread& rt = rank_threads_[ev.tid];
    rt.pid = ev.pid;
    rt.communicator = comm;
  };
  if (ev.kind == hal::EventKind::kCommInit) {
    // A failed init is kept as the engine keeps it (engine/fleet_collectives.cc): a collective
    // in flight is numbered as the stored ones are.
    const CommState& c = comms_[{ev.pid, comm}] = CommState{hal::CommunicatorInit::of(ev), 0};
    watch(c.init.nranks);
  } else if (ev.kind == hal::EventKind::kCollective) {
    auto it = comms_.find({ev.pid, comm});
    if (it != comms_.end()) ++it->second.completed;
    watch(it != comms_.end() ? it->second.init.nranks : 0);  // 0: unknown, peers assumed
  } else if (ev.kind == hal::EventKind::kCommDestroy) {
    // Done with its peers (the end of training, then evaluation or a checkpoint): it was
    // reported idle for as long as it lived.
    comms_.erase({ev.pid, comm});
    for (auto it = rank_threads_.begin(); it != rank_threads_.end();)
      it = it->second.pid == ev.pid && it->second.communicator == comm ? rank_threads_.erase(it)
                                                                       : std::next(it);
  }
}

hal::ThreadState InflightMonitor::state_of(uint32_t pid, uint32_t tid,
                                           std::optional<hal::ThreadSched> s, uint64_t* since) {
  *since = 0;
  if (!s) s = host_.sched(tid);
  if (s) {
    if (!s->off_since_ns) return hal::ThreadState::kRunning;
    *since = s->off_since_ns;
    if (s->state == 0) return hal::ThreadState::kRunnable;
    if (s->state & (kTaskStopped | kTaskTraced)) return hal::ThreadState::kStopped;
    if ((s->state & kTaskUninterruptible) && !(s->state & kTaskNoload))
      return hal::ThreadState::kIo;
    return hal::ThreadState::kSleeping;
  }
  switch (host_.proc_state(pid, tid)) {
    case 0:
      return hal::ThreadState::kExited;
    case 'R':
      return hal::ThreadState::kRunning;
    case 'D':
      return hal::ThreadState::kIo;
    case 'S':
    case 'I':
      return hal::ThreadState::kSleeping;
    case 'T':
    case 't':
      return hal::ThreadState::kStopped;
    default:
      return hal::ThreadState::kUnknown;
  }
}

void InflightMonitor::count_others(hal::Inflight& row) {
  row.others_running = row.others_sleeping = row.others_io = 0;
  // The states of a process's threads are read once a tick, however many of its threads are
  // stuck (1,000 threads inside a call would otherwise read 1,000 x 1,000 states).
  auto cached = tick_threads_.find(row.call.pid);
  if (cached == tick_threads_.end()) {
    std::vector<std::pair<uint32_t, hal::ThreadState>> states;
    for (uint32_t tid : host_.threads(row.call.pid)) {
      uint64_t since = 0;
      states.emplace_back(tid, state_of(row.call.pid, tid, std::nullopt, &since));
    }
    cached = tick_threads_.emplace(row.call.pid, std::move(states)).first;
  }
  for (const auto& [tid, state] : cached->second) {
    if (tid == row.call.tid) continue;
    switch (state) {
      case hal::ThreadState::kRunning:
      case hal::ThreadState::kRunnable:
        ++row.others_running;
        break;
      case hal::ThreadState::kIo:
        ++row.others_io;
        break;
      case hal::ThreadState::kSleeping:
      case hal::ThreadState::kStopped:  // not running, as a sleeper: the row has no column of its
                                        // own
        ++row.others_sleeping;
        break;
      default:
        break;
    }
  }
}

void InflightMonitor::set_collective(hal::Event& ev, uint64_t* seq) const {
  *seq = hal::kNoSeq;
  auto it = comms_.find({ev.pid, ev.get_or(hal::Field::kCommunicator, 0)});
  if (it == comms_.end()) return;
  it->second.init.fill(ev);
  *seq = it->second.completed;
}

void InflightMonitor::track_call(const ingero_inflight_rec& r, uint64_t now,
                                 hal::InflightReport& report) {
  Key key{r.tid, r.start_ns};
  auto it = tracked_.find(key);
  bool fresh = it == tracked_.end();
  if (fresh) {
    // A frame whose call unwound without returning (longjmp, an exception, a return the kernel
    // dropped) stays until the thread's next traced call: a thread blocked above the call's
    // entry is no longer inside it.
    uint64_t sp = host_.blocked_sp(r.pid, r.tid);
    if (sp && sp > r.sp) {
      ++counters_.stale;
      return;
    }
    Tracked t;
    hal::CallRecord rec = as_record(r);
    if (!decoder_.decode(rec, t.row.call)) {
      ++counters_.undecoded;
      return;
    }
    hal::Event& ev = t.row.call;
    if (ev.kind == hal::EventKind::kRdmaAsyncEvent) {
      t.waits_for_events = true;
      ++counters_.event_waits;
      it = tracked_.emplace(key, std::move(t)).first;
      it->second.seen = true;
      return;
    }
    ev.set_comm(host_.comm(r.pid, r.tid));
    if (ev.kind == hal::EventKind::kCollective) set_collective(ev, &t.row.seq);
    if (stacks) t.row.stack_id = stacks->live_stack(r.pid, r.tid, r.caller, r.fp, r.py_tstate);
    t.row.reported_ns = now;
    it = tracked_.emplace(key, std::move(t)).first;
    ++counters_.reported;
  }
  Tracked& t = it->second;
  t.seen = true;
  if (t.waits_for_events) return;
  hal::Inflight& row = t.row;
  std::optional<hal::ThreadSched> s;
  if (r.flags & INGERO_INFLIGHT_SCHED) s = hal::ThreadSched{r.off_since_ns, r.off_state};
  uint64_t since = 0;
  hal::ThreadState state = state_of(r.pid, r.tid, s, &since);
  bool changed = fresh || state != row.state || since != row.state_since_ns ||
                 now - t.written_ns >= options_.refresh_ns;
  row.state = state;
  row.state_since_ns = since;
  row.seen_ns = now;
  row.call.dur_ns = now - r.start_ns;
  // Off-CPU during the call so far: what the last return to a CPU added up, and the stretch
  // it is off now.
  row.call.off_cpu_ns =
      r.off_cpu_ns + (since && since < now ? now - std::max<uint64_t>(since, r.start_ns) : 0);
  row.call.nested = r.nested;
  if (changed) {
    count_others(row);
    t.written_ns = now;
  }
  report.current.push_back(row);
  report.changed.push_back(changed);
}

void InflightMonitor::track_idle(uint32_t tid, const RankThread& rt, uint64_t now,
                                 hal::InflightReport& report) {
  Key key{tid, 0};
  auto it = tracked_.find(key);
  bool fresh = it == tracked_.end();
  uint64_t since = 0;
  hal::ThreadState state = state_of(rt.pid, tid, std::nullopt, &since);
  if (state == hal::ThreadState::kExited) return;
  if (fresh) {
    Tracked t;
    hal::Event& ev = t.row.call;
    t.row.what = hal::Inflight::What::kIdle;
    ev.pid = rt.pid;
    ev.tid = tid;
    ev.ts_ns = rt.last_end;
    ev.set_comm(host_.comm(rt.pid, tid));
    ev.set(hal::Field::kCommunicator, rt.communicator);
    set_collective(ev, &t.row.seq);
    t.row.reported_ns = now;
    it = tracked_.emplace(key, std::move(t)).first;
    ++counters_.idle;
  }
  Tracked& t = it->second;
  t.seen = true;
  if (t.waits_for_events) return;
  hal::Inflight& row = t.row;
  bool moved = since != row.state_since_ns || state == hal::ThreadState::kRunning;
  bool changed = fresh || state != row.state || since != row.state_since_ns ||
                 now - t.written_ns >= options_.refresh_ns;
  // Its Python frames move while it runs; asleep since the last read, they are the same.
  if (stacks && (fresh || (changed && moved)))
    row.stack_id = stacks->live_stack(rt.pid, tid, 0, 0, host_.py_tstate(tid));
  row.state = state;
  row.state_since_ns = since;
  row.seen_ns = now;
  row.call.dur_ns = now - rt.last_end;
  if (changed) {
    count_others(row);
    t.written_ns = now;
  }
  report.current.push_back(row);
  report.changed.push_back(changed);
}

void InflightMonitor::finish(Tracked& t, uint64_t now, hal::InflightReport& report, bool stopping) {
  hal::Inflight row = t.row;
  using S = hal::Inflight::Status;
  if (stopping) {
    row.status = S::kStopped;
    row.ended_ns = now;
  } else if (row.what == hal::Inflight::What::kIdle) {
    // It made a traced call again, or its thread is gone (a rank killed while it stayed away).
    bool gone = host_.proc_state(row.call.pid, row.call.tid) == 0;
    row.status = gone ? S::kUnfinished : S::kReturned;
    if (gone) row.state = hal::ThreadState::kExited;
    row.ended_ns = now;
  } else if (t.unfinished ||
             (!t.returned_ns && host_.proc_state(row.call.pid, row.call.tid) == 0)) {
    row.status = S::kUnfinished;
    row.ended_ns = t.returned_ns ? t.returned_ns : now;
    row.state = hal::ThreadState::kExited;
  } else {
    row.status = S::kReturned;
    row.ended_ns = t.returned_ns ? t.returned_ns : now;
  }
  if (row.ended_ns > row.call.ts_ns) row.call.dur_ns = row.ended_ns - row.call.ts_ns;
  row.seen_ns = std::max(row.seen_ns, row.ended_ns);
  report.ended.push_back(std::move(row));
}

void InflightMonitor::tick(uint64_t now) {
  uint64_t cpu0 = thread_cpu_ns();
  ++counters_.ticks;
  frames_.clear();
  if (auto st = host_.frames(frames_); !st) {
    ++counters_.read_errors;
    if (on_warning && st.error().message != last_warning_) on_warning(st.error().message);
    last_warning_ = st.error().message;
    counters_.cpu_ns += thread_cpu_ns() - cpu0;
    return;
  }
  counters_.frames += frames_.size();
  hal::InflightReport report;
  report.now_ns = now;
  report.after_ns = options_.after_ns;
  tick_threads_.clear();
  for (auto& [k, t] : tracked_) t.seen = false;
  std::unordered_set<uint32_t> in_call;
  for (const auto& r : frames_) {
    in_call.insert(r.tid);
    if (r.start_ns && r.start_ns <= now && now - r.start_ns >= options_.after_ns)
      track_call(r, now, report);
  }
  for (auto it = rank_threads_.begin(); it != rank_threads_.end();) {
    const auto& [tid, rt] = *it;
    if (in_call.count(tid) || !rt.last_end || now < rt.last_end ||
        now - rt.last_end < options_.after_ns) {
      ++it;
      continue;
    }
    if (host_.proc_state(rt.pid, tid) == 0) {  // gone: forget it
      it = rank_threads_.erase(it);
      continue;
    }
    track_idle(tid, rt, now, report);
    ++it;
  }
  for (auto it = tracked_.begin(); it != tracked_.end();) {
    if (it->second.seen) {
      ++it;
      continue;
    }
    if (!it->second.waits_for_events) finish(it->second, now, report, false);
    it = tracked_.erase(it);
  }
  (void)out_.on_inflight(report);
  counters_.cpu_ns += thread_cpu_ns() - cpu0;
}

void InflightMonitor::stop(uint64_t now) {
  hal::InflightReport report;
  report.now_ns = now;
  report.after_ns = options_.after_ns;
  for (auto& [k, t] : tracked_)
    if (!t.waits_for_events) finish(t, now, report, true);
  tracked_.clear();
  (void)out_.on_inflight(report);
}

}  // namespace ingero::capture
