// failed_calls: GPU calls that returned an error, per process. A call that fails is as silent
// as one that succeeds to a program that does not check it, and a sticky device fault (a
// kernel's illegal access) surfaces at the next call that waits, not at the launch that caused
// it: the chain names the first failure, its code as the vendor spells it, what every later
// call did, and for a fault the launches in flight when it surfaced. Out-of-memory is gpu_oom's
// (rules_host.cc); a query's "not ready" is no failure.
#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>

#include "engine/analysis.h"
#include "engine/kernels.h"
#include "engine/thresholds.h"
#include "hal/kernel_names.h"

namespace ingero::engine {

using hal::ErrorClass;

namespace {

constexpr uint64_t kNoStream = UINT64_MAX;

bool queues_work(const hal::Event& e) {
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

bool waits_for_gpu(const hal::Event& e) {
  if (e.kind == hal::EventKind::kSync) return true;
  return e.kind == hal::EventKind::kMemcpy &&
         e.get_or(hal::Field::kDirection, 0) == uint64_t(hal::CopyDirection::kDeviceToHost);
}

}  // namespace

struct FailedCalls::Counts {
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
  };
  struct Failure {
    int64_t ts = 0;
    uint64_t dur = 0, stack = 0;
    uint32_t tid = 0;
    std::string_view vendor, api, op;
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
    if (finished && e.ret == 0) {
      ++p.returned;
      ++p.ok;
      if (waits_for_gpu(e)) waited(p, e);
    } else if (finished) {
      auto [cls, name] = classify(e);
      if (cls == ErrorClass::kNotReady) return;  // an answer, not a failure
      ++p.returned;
      if (cls == ErrorClass::kOutOfMemory) return;  // gpu_oom's
      failed(p, e, cls, name);
      return;  // a call that failed queued nothing
    }
    if (queues_work(e) && !(finished && waits_for_gpu(e)))
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
      for (uint64_t k = in.queued - std::min<uint64_t>(in.queued, kFailedCallsLaunchesKept);
           k < in.queued; ++k)
        recent.push_back(in.last[k % kFailedCallsLaunchesKept]);
    }
    std::stable_sort(recent.begin(), recent.end(),
                     [](const Queued& x, const Queued& y) { return x.ts < y.ts; });
    size_t from = recent.size() - std::min(recent.size(), size_t(kFailedCallsLaunchesKept));
    uint64_t before = all.queued - (recent.size() - from);
    for (size_t i = from; i < recent.size(); ++i)
      all.last[(before + (i - from)) % kFailedCallsLaunchesKept] = recent[i];
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
                .op = e.op};
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

FailedCalls::FailedCalls(TraceSource& source) : counts_(std::make_unique<Counts>(source)) {}
FailedCalls::~FailedCalls() = default;
void FailedCalls::call(const hal::Event& e) { counts_->call(e); }
void FailedCalls::run(const CallRun& r) { counts_->run(r); }

namespace {

using Counts = FailedCalls::Counts;

std::string code_text(const Counts::Code& c) {
  return c.known ? std::string(c.known->name) + " (" + std::to_string(c.ret) + ")"
                 : "error " + std::to_string(c.ret);
}

std::string ops_text(const Counts::Code& c) {
  std::string s;
  for (std::string_view op : c.ops) s += (s.empty() ? "" : ", ") + std::string(op);
  return s + (c.more_ops ? ", ..." : "");
}

Severity severity_of(ErrorClass cls, const Counts::Proc& p) {
  if (cls == ErrorClass::kNoDevice || cls == ErrorClass::kDeviceFault) return Severity::kHigh;
  if (p.failed < kFailedCallsMinForShare) return Severity::kLow;  // a share of a few is none
  double share = double(p.failed) / double(std::max<uint64_t>(p.returned, 1));
  if (share >= kFailedCallsHighShare) return Severity::kHigh;
  if (share >= kFailedCallsMediumShare || p.failed >= kFailedCallsMediumCount)
    return Severity::kMedium;
  return Severity::kLow;
}

const char* root_cause_of(ErrorClass cls) {
  switch (cls) {
    case ErrorClass::kNoDevice:
      return "The process could not use a GPU: none is visible to it, its driver is missing or "
             "older than the runtime, or its code was not built for this GPU. Every call that "
             "needs the device fails";
    case ErrorClass::kDeviceFault:
      return "The GPU context failed (a kernel's illegal access, a device fault). The error is "
             "sticky: every later call of the process fails, and it surfaces at the next call "
             "that waits for the GPU, not at the launch that caused it";
    case ErrorClass::kInvalid:
      return "GPU calls were made with invalid arguments or in an invalid state, and the "
             "program went on";
    default:
      return "GPU calls returned errors";
  }
}

std::vector<std::string> fixes_of(ErrorClass cls, bool amd) {
  switch (cls) {
    case ErrorClass::kNoDevice:
      return {amd ? "Check that the process sees a GPU: rocm-smi, HIP_VISIBLE_DEVICES and "
                    "ROCR_VISIBLE_DEVICES, access to /dev/kfd and /dev/dri in its container"
                  : "Check that the process sees a GPU: nvidia-smi, CUDA_VISIBLE_DEVICES, the "
                    "container's GPU runtime (--gpus, the NVIDIA device plugin)",
              amd ? "Check the ROCm runtime against the kernel driver (amdgpu) and that the "
                    "binary has code for this GPU's architecture (gfx)"
                  : "The driver must be as new as the CUDA runtime the program ships (its "
                    "wheel's libcudart), and the binary must have code for this GPU (sm_XX)"};
    case ErrorClass::kDeviceFault:
      return {amd ? "Rerun with AMD_SERIALIZE_KERNEL=3 so that the launch that faults is the "
                    "call that fails"
                  : "Rerun with CUDA_LAUNCH_BLOCKING=1 so that the launch that faults is the "
                    "call that fails",
              amd ? "Find the faulting access with the address sanitizer or rocgdb; the "
                    "launches above were in flight"
                  : "Find the faulting access with compute-sanitizer; the launches above were "
                    "in flight",
              amd ? "Check the device (dmesg, rocm-smi): a fault that recurs on one GPU only is "
                    "the GPU"
                  : "Check the device (dmesg for Xid lines, nvidia-smi -q for ECC errors): a "
                    "fault that recurs on one GPU only is the GPU"};
    case ErrorClass::kInvalid:
      return {
          "Check the arguments of the call at the stack below, and check the return codes "
          "of GPU calls where the program does not"};
    default:
      return {
          "Look the code up in the vendor's documentation and check the call at the stack "
          "below"};
  }
}

// The work in flight when a fault surfaced: what its stream had queued since the last call
// that waited for it and returned success (every stream's, where the failing call named none),
// the last of it by kernel name or op. `windowed`: the analysis saw a window, not the trace.
std::string in_flight_text(const Counts::InFlight& in, uint32_t pid, bool windowed,
                           const std::map<std::pair<uint32_t, uint64_t>, std::string>& names) {
  uint64_t n = in.queued;
  std::string since = in.merged ? "since each stream's last wait that returned success"
                      : in.wait_end
                          ? "since the last " + std::string(in.wait_op) +
                                " that returned success (" + format_wall(in.wait_end) + ")"
                      : windowed ? "since the window began"
                                 : "since the trace began";
  if (!n) return "no launch " + since;
  uint64_t kept = std::min<uint64_t>(n, kFailedCallsLaunchesKept);
  // In order, a kernel launched several times in a row once: "gather_rows<float> × 7".
  std::vector<std::pair<std::string, uint64_t>> runs;
  for (uint64_t k = n - kept; k < n; ++k) {
    const auto& q = in.last[k % kFailedCallsLaunchesKept];
    auto it = names.find({pid, q.func});
    std::string name = !q.kernel           ? std::string(q.op)
                       : it != names.end() ? hal::short_kernel_name(it->second)
                       : q.func            ? unnamed_function_label(q.func)
                                           : "a kernel";
    if (!runs.empty() && runs.back().first == name)
      ++runs.back().second;
    else
      runs.emplace_back(std::move(name), 1);
  }
  std::string list;
  for (const auto& [name, times] : runs)
    list +=
        (list.empty() ? "" : ", ") + name + (times > 1 ? " \u00d7 " + std::to_string(times) : "");
  std::string what =
      in.kernels == n ? (n == 1 ? " launch " : " launches ")
                      : (n == 1 ? " call that queued GPU work " : " calls that queued GPU work ");
  return format_count(n) + what + since + "; " +
         (kept == n ? "" : "the last " + std::to_string(kept) + ": ") + list;
}

// What a class weighs when a process failed with several: a fault makes every later call
// fail, so it leads even where an invalid argument came first.
int weight(ErrorClass cls) {
  switch (cls) {
    case ErrorClass::kDeviceFault:
      return 3;
    case ErrorClass::kNoDevice:
      return 2;
    case ErrorClass::kInvalid:
      return 1;
    default:
      return 0;
  }
}

// The code a process's chain is about: the weightiest class, its earliest first failure.
const Counts::Code& lead_code(const Counts::Proc& p) {
  const Counts::Code* lead = &p.codes.front();
  for (const auto& c : p.codes)
    if (std::make_pair(-weight(c.cls), c.first.ts) <
        std::make_pair(-weight(lead->cls), lead->first.ts))
      lead = &c;
  return *lead;
}

// "Failed: cudaErrorIllegalAddress (700) from 5 calls of cudaStreamSynchronize; ...", the codes
// by their calls.
std::string codes_text(const Counts::Proc& p) {
  std::vector<const Counts::Code*> codes;
  for (const auto& k : p.codes) codes.push_back(&k);
  std::stable_sort(codes.begin(), codes.end(),
                   [](const auto* x, const auto* y) { return x->calls > y->calls; });
  std::string s;
  for (size_t i = 0; i < codes.size() && i < kFailedCallsCodesNamed; ++i)
    s += (i ? "; " : "") + code_text(*codes[i]) + " from " + format_count(codes[i]->calls) +
         (codes[i]->calls == 1 ? " call of " : " calls of ") + ops_text(*codes[i]);
  uint64_t others = p.unkept_failures;
  for (size_t i = kFailedCallsCodesNamed; i < codes.size(); ++i) others += codes[i]->calls;
  if (others) s += "; " + format_count(others) + " more with other codes";
  return "Failed: " + s + ".";
}

Chain failed_chain(TraceSource& source, const Analysis& a, uint32_t pid, const Counts::Proc& p,
                   const std::map<std::pair<uint32_t, uint64_t>, std::string>& names) {
  const Counts::Code& code = lead_code(p);
  const Counts::Failure& f = code.first;
  ErrorClass cls = code.cls;
  Chain c = new_chain("failed_calls", std::string(f.vendor), std::string(f.api), std::string(f.op),
                      {pid}, f.ts, std::max(f.ts, p.last_fail));
  c.severity = severity_of(cls, p);
  uint64_t returned_after = p.returned - code.returned_before - 1;
  uint64_t ok_after = p.ok - code.ok_before;
  // A window that is not the whole trace may begin after a process's first failure.
  bool windowed = a.window.from_ns != Window{}.from_ns;
  std::string first_of = windowed ? " in the window" : "";
  std::string who = a.process_name(pid) + " (pid " + std::to_string(pid) + ")";
  std::string counted = format_count(p.failed) + " of " + format_count(p.returned) + " GPU calls";
  std::string first = std::string(f.op) + " returned " + code_text(code);
  if (cls == ErrorClass::kNoDevice)
    c.summary = who + " could not use a GPU: " + counted + " failed, the first " + first;
  else if (cls == ErrorClass::kDeviceFault)
    c.summary =
        who + "'s GPU context failed: " + first +
        (returned_after ? ", and " + format_count(returned_after - ok_after) + " of the " +
                              format_count(returned_after) + " calls that returned after it failed"
                        : "");
  else
    c.summary = counted + " of " + who + " failed, the first " + first;
  c.root_cause = root_cause_of(cls);
  c.explanation = codes_text(p) + " The first " + code_text(code) + first_of + " at " +
                  format_wall(f.ts) + " on thread " + std::to_string(f.tid) + ", after " +
                  format_count(code.ok_before) + (code.ok_before == 1 ? " call" : " calls") +
                  " that returned success; after it, " + format_count(ok_after) + " of " +
                  format_count(returned_after) + " succeeded.";
  if (p.first_fail < f.ts)
    c.explanation += " Calls had failed before it, from " + format_wall(p.first_fail) + ".";
  std::string layer = layer_of(f.api);
  c.timeline.push_back({layer, std::string(f.op), "first failure: " + first, f.dur / 1000});
  if (cls == ErrorClass::kDeviceFault)
    c.timeline.push_back({layer, "launches",
                          "in flight: " + in_flight_text(code.in_flight, pid, windowed, names), 0});
  if (returned_after)
    c.timeline.push_back({layer, "after",
                          format_count(ok_after) + " of the " + format_count(returned_after) +
                              " calls that returned after it succeeded",
                          0});
  c.fixes = fixes_of(cls, f.vendor == "amd");
  if (f.stack) {
    ChainStack cs;
    cs.stack_id = f.stack;
    cs.counts = StackCounts::kFirstFailure;
    cs.calls = cs.examined = 1;
    cs.worst_ns = f.dur;
    cs.pid = pid;
    cs.tid = f.tid;
    cs.frames = user_frames(source.stack(f.stack));
    if (!cs.frames.empty()) c.stacks.push_back(std::move(cs));
  }
  c.stacks_sought = true;
  c.id = c.rule + ":" + std::to_string(pid) + ":" + c.op;
  // No usable GPU, or a context lost: nothing else the process did can be judged after it.
  bool fatal = cls == ErrorClass::kNoDevice || cls == ErrorClass::kDeviceFault;
  c.score = (fatal ? 1e8 : 0) + double(p.failed);
  return c;
}

}  // namespace

void FailedCalls::chains(TraceSource& source, const Analysis& a, std::vector<Chain>& out) {
  std::map<std::pair<uint32_t, uint64_t>, std::string> names;
  bool faults = false;
  for (const auto& [pid, p] : counts_->procs)
    for (const auto& c : p.codes) faults |= c.cls == ErrorClass::kDeviceFault;
  if (faults)
    for (auto& k : source.kernel_names(a.window.node)) names[{k.pid, k.func}] = std::move(k.name);
  for (const auto& [pid, p] : counts_->procs)
    if (!p.codes.empty() && !is_tracer(a, pid))
      out.push_back(failed_chain(source, a, pid, p, names));
}

}  // namespace ingero::engine
