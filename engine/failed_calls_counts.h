// The failed_calls rule's counts (engine/rules_failed_calls.cc): what the op statistics' one
// pass keeps of each process's calls that returned, the codes they failed with, each code's
// first failure, and the work each stream had queued. engine/failed_calls_counts.cc feeds it;
// the rule words it.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "engine/analysis.h"
#include "engine/thresholds.h"
#include "hal/error_codes.h"

namespace ingero::engine {

namespace failed_calls {

inline constexpr uint64_t kNoStream = UINT64_MAX;

inline bool queues_work(const hal::Event& e) {
  using K = hal::EventKind;
  switch (e.kind) {
    case K::kLaunch:
    case K::kGraphLaunch:
    case K::kCollective:
    case K::kP2P:
    case K::kMemset:
    case K::kMemcpy:
      return true;
    default:
      return false;
  }
}

inline bool waits_for_gpu(const hal::Event& e) {
  if (e.kind == hal::EventKind::kSync) return true;
  return e.kind == hal::EventKind::kMemcpy &&
         e.get_or(hal::Field::kDirection, 0) == uint64_t(hal::CopyDirection::kDeviceToHost);
}

}  // namespace failed_calls

struct FailedCalls::Counts {
  using ErrorClass = hal::ErrorClass;
  static constexpr uint64_t kNoStream = failed_calls::kNoStream;

  // A call that queued work on the GPU: a launch, a graph launch, a collective, a copy or set
  // that did not wait.
  struct Queued {
    int64_t ts = 0;
    uint64_t func = 0;  // a launch's kernel function
    std::string_view op;
    bool kernel = false;
  };
  // What one stream had queued since the last call that waited for it and returned success:
  // how many, the last kFailedCallsLaunchesKept (a ring), and that wait's end and op.
  struct InFlight {
    uint64_t queued = 0, kernels = 0;
    std::array<Queued, kFailedCallsLaunchesKept> last{};
    int64_t wait_end = 0;
    std::string_view wait_op;
    bool merged = false;  // every stream's together: the failing call named none
    void add(const Queued& q) {
      last[queued % kFailedCallsLaunchesKept] = q;
      ++queued;
      kernels += q.kernel;
    }
    // The last of what was queued, in order (at most kFailedCallsLaunchesKept).
    std::vector<Queued> recent() const {
      std::vector<Queued> v;
      for (uint64_t k = queued - std::min<uint64_t>(queued, kFailedCallsLaunchesKept); k < queued;
           ++k)
        v.push_back(last[k % kFailedCallsLaunchesKept]);
      return v;
    }
  };
  struct Failure {
    int64_t ts = 0;
    uint64_t dur = 0, stack = 0;
    uint32_t tid = 0;
    std::string_view vendor, api, op;
    hal::EventKind kind = hal::EventKind::kUnknown;
  };
  // One return code of one API in one process, and its first failure.
  struct Code {
    std::string_view api;
    int64_t ret = 0;
    std::optional<hal::ErrorCode> known;
    ErrorClass cls = ErrorClass::kOther;
    uint64_t calls = 0;
    std::set<std::string_view> ops;  // the first kFailedCallsOpsKept
    bool more_ops = false;
    Failure first;
    // The process's calls that had returned, and returned success, before its first failure.
    uint64_t returned_before = 0, ok_before = 0;
    InFlight in_flight;  // at its first failure: its stream's, for a device fault
  };
  struct Proc {
    uint64_t returned = 0, ok = 0, failed = 0;  // failed: OOM excluded
    // Calls whose result was not read: launches seen at entry only (--launch-timing), calls
    // unfinished at the end. Neither failed nor succeeded as far as the trace knows.
    uint64_t unread = 0;
    int64_t first_fail = 0, last_fail = 0;
    // By stream (kNoStream: calls that name none, and streams past kFailedCallsStreamsKept).
    std::map<uint64_t, InFlight> streams;
    std::vector<Code> codes;       // the first kFailedCallsCodesKept codes, in order of first
    uint64_t unkept_failures = 0;  // failures with a code past them
  };

  explicit Counts(TraceSource& s) : source(s) {}

  // The class and name of a code, asked of the source once per API and code; else the class
  // the backend stored with the call (files whose reader was given no names). A stream of
  // distinct codes (garbage returns) is asked each time rather than kept.
  std::pair<ErrorClass, std::optional<hal::ErrorCode>> classify(const hal::Event& e) {
    auto key = std::make_pair(e.api.data(), e.ret);
    std::optional<hal::ErrorCode> code;
    if (auto it = known.find(key); it != known.end()) {
      code = it->second;
    } else {
      code = source.error_code(e.api, e.ret);
      if (known.size() < kFailedCallsCodesCached) known.emplace(key, code);
    }
    if (code) return {code->cls, code};
    uint64_t stored = e.get_or(hal::Field::kErrClass, uint64_t(ErrorClass::kOther));
    return {stored > uint64_t(ErrorClass::kInvalid) ? ErrorClass::kOther : ErrorClass(stored),
            std::nullopt};
  }

  Proc& proc(uint32_t pid) {
    if (pid != last_pid || !last) {
      last = &procs[pid];
      last_pid = pid;
    }
    return *last;
  }

  // The stream a call names, or kNoStream; a process's streams past kFailedCallsStreamsKept
  // share kNoStream's.
  static uint64_t stream_of(const Proc& p, std::optional<uint64_t> s) {
    if (!s || *s == kNoStream) return kNoStream;
    if (p.streams.count(*s) || p.streams.size() < kFailedCallsStreamsKept) return *s;
    return kNoStream;
  }

  void call(const hal::Event& e) {
    Proc& p = proc(e.pid);
    bool finished = e.has_ret && !e.unfinished;
    if (!finished) ++p.unread;
    if (finished && e.ret == 0) {
      ++p.returned;
      ++p.ok;
      if (failed_calls::waits_for_gpu(e)) waited(p, e);
    } else if (finished) {
      auto [cls, name] = classify(e);
      if (cls == ErrorClass::kNotReady) return;  // an answer, not a failure
      ++p.returned;
      if (cls == ErrorClass::kOutOfMemory) return;  // gpu_oom's
      failed(p, e, cls, name);
      return;  // a call that failed queued nothing
    }
    if (failed_calls::queues_work(e) && !(finished && failed_calls::waits_for_gpu(e)))
      p.streams[stream_of(p, e.get(hal::Field::kStream))].add(
          {.ts = int64_t(e.ts_ns),
           .func = e.get_or(hal::Field::kFunc, 0),
           .op = e.op,
           .kernel = e.kind == hal::EventKind::kLaunch});
  }

  // A wait that returned success: its stream's work is done, or every stream's where it names
  // none (a device or context sync).
  static void waited(Proc& p, const hal::Event& e) {
    InFlight done;
    done.wait_end = int64_t(e.ts_ns + e.dur_ns);
    done.wait_op = e.op;
    auto s = e.get(hal::Field::kStream);
    if (s) {
      p.streams[stream_of(p, s)] = done;
      return;
    }
    for (auto& [id, in] : p.streams) in = done;
    p.streams[kNoStream] = done;
  }

  // What was in flight at a failure: its stream's queue where it names one, else every
  // stream's together (the most recent last).
  static InFlight in_flight_at(const Proc& p, const hal::Event& e) {
    if (auto s = e.get(hal::Field::kStream)) {
      auto it = p.streams.find(stream_of(p, s));
      return it == p.streams.end() ? InFlight{} : it->second;
    }
    InFlight all;
    all.merged = true;
    std::vector<Queued> recent;
    for (const auto& [id, in] : p.streams) {
      all.queued += in.queued;
      all.kernels += in.kernels;
      for (const Queued& q : in.recent()) recent.push_back(q);
    }
    std::stable_sort(recent.begin(), recent.end(),
                     [](const Queued& x, const Queued& y) { return x.ts < y.ts; });
    size_t from = recent.size() - std::min(recent.size(), size_t(kFailedCallsLaunchesKept));
    // The totals less what is added back, so that the ring holds the newest at their places.
    for (size_t i = from; i < recent.size(); ++i) {
      --all.queued;
      all.kernels -= recent[i].kernel;
    }
    for (size_t i = from; i < recent.size(); ++i) all.add(recent[i]);
    return all;
  }

  void failed(Proc& p, const hal::Event& e, ErrorClass cls,
              const std::optional<hal::ErrorCode>& name) {
    int64_t ts = int64_t(e.ts_ns);
    p.first_fail = p.failed++ ? std::min(p.first_fail, ts) : ts;
    p.last_fail = std::max(p.last_fail, ts);
    auto it = std::find_if(p.codes.begin(), p.codes.end(),
                           [&](const Code& c) { return c.api == e.api && c.ret == e.ret; });
    if (it == p.codes.end()) {
      if (p.codes.size() >= kFailedCallsCodesKept) {
        ++p.unkept_failures;
        return;
      }
      Failure f{.ts = ts,
                .dur = e.dur_ns,
                .stack = e.stack_id,
                .tid = e.tid,
                .vendor = e.vendor,
                .api = e.api,
                .op = e.op,
                .kind = e.kind};
      it = p.codes.insert(p.codes.end(), Code{.api = e.api,
                                              .ret = e.ret,
                                              .known = name,
                                              .cls = cls,
                                              .calls = 0,
                                              .ops = {},
                                              .more_ops = false,
                                              .first = f,
                                              .returned_before = p.returned - 1,
                                              .ok_before = p.ok,
                                              .in_flight = in_flight_at(p, e)});
    }
    ++it->calls;
    if (it->ops.size() < kFailedCallsOpsKept)
      it->ops.insert(e.op);
    else if (!it->ops.count(e.op))
      it->more_ops = true;
  }

  // A folded run holds launches that succeeded on one stream, with no other call of the
  // process among them (store/tiers.h): in flight like any.
  void run(const CallRun& r) {
    Proc& p = proc(r.pid);
    p.returned += r.timed();
    p.ok += r.timed();
    if (r.kind != hal::EventKind::kLaunch) return;
    InFlight& in = p.streams[stream_of(p, r.stream)];
    uint64_t kept = std::min<uint64_t>(r.calls, kFailedCallsLaunchesKept);
    in.queued += r.calls - kept;
    in.kernels += r.calls - kept;
    for (uint64_t k = 0; k < kept; ++k)
      in.add({.ts = r.ts_ns, .func = r.func.value_or(0), .op = r.op, .kernel = true});
  }

  TraceSource& source;
  std::map<std::pair<const char*, int64_t>, std::optional<hal::ErrorCode>> known;
  std::map<uint32_t, Proc> procs;
  uint32_t last_pid = 0;
  Proc* last = nullptr;
};

}  // namespace ingero::engine
