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
#include "engine/failed_calls_counts.h"
#include "engine/kernels.h"
#include "engine/thresholds.h"
#include "hal/kernel_names.h"

namespace ingero::engine {

using hal::ErrorClass;

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

// No usable GPU, or a context lost: nothing else the process did can be judged after it.
bool fatal(ErrorClass cls) {
  return cls == ErrorClass::kNoDevice || cls == ErrorClass::kDeviceFault;
}

Severity severity_of(ErrorClass cls, const Counts::Proc& p) {
  if (fatal(cls)) return Severity::kHigh;
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

// The fixes by the vendor of the failing call: NVIDIA's and AMD's tools by name; any other
// vendor's (a backend added later) in its own terms, never another vendor's tools.
std::vector<std::string> fixes_of(ErrorClass cls, std::string_view vendor) {
  const bool amd = vendor == "amd", nvidia = vendor == "nvidia";
  switch (cls) {
    case ErrorClass::kNoDevice:
      if (!amd && !nvidia)
        return {
            "Check that the process sees a GPU: the vendor's device tool, its visible-devices "
            "variable, the container's access to the device",
            "Check the vendor's runtime against its kernel driver, and that the binary has "
            "code for this GPU"};
      return {amd ? "Check that the process sees a GPU: rocm-smi, HIP_VISIBLE_DEVICES and "
                    "ROCR_VISIBLE_DEVICES, access to /dev/kfd and /dev/dri in its container"
                  : "Check that the process sees a GPU: nvidia-smi, CUDA_VISIBLE_DEVICES, the "
                    "container's GPU runtime (--gpus, the NVIDIA device plugin)",
              amd ? "Check the ROCm runtime against the kernel driver (amdgpu) and that the "
                    "binary has code for this GPU's architecture (gfx)"
                  : "The driver must be as new as the CUDA runtime the program ships (its "
                    "wheel's libcudart), and the binary must have code for this GPU (sm_XX)"};
    case ErrorClass::kDeviceFault:
      if (!amd && !nvidia)
        return {
            "Rerun with the vendor's setting that makes launches synchronous, so that the "
            "launch that faults is the call that fails",
            "Find the faulting access with the vendor's memory checker; the launches above "
            "were in flight",
            "Check the device (dmesg, the vendor's tools): a fault that recurs on one GPU "
            "only is the GPU"};
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
  std::vector<Counts::Queued> recent = in.recent();
  uint64_t kept = recent.size();
  // In order, a kernel launched several times in a row once: "gather_rows<float> × 7".
  std::vector<std::pair<std::string, uint64_t>> runs;
  for (const auto& q : recent) {
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

// The code a process's chain is about: the weightiest class, its earliest first failure. A
// communicator init that failed before invalid-argument failures leads them: the collectives
// on the communicator it never made fail as invalid (ncclInvalidArgument), and the chain named
// the first all-reduce, with "Calls had failed before it".
const Counts::Code& lead_code(const Counts::Proc& p) {
  const Counts::Code* lead = &p.codes.front();
  for (const auto& c : p.codes)
    if (std::make_pair(-weight(c.cls), c.first.ts) <
        std::make_pair(-weight(lead->cls), lead->first.ts))
      lead = &c;
  if (lead->cls == ErrorClass::kInvalid)
    for (const auto& c : p.codes)
      if (c.first.kind == hal::EventKind::kCommInit && c.first.ts < lead->first.ts) lead = &c;
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
  std::string who = a.process_label(pid);
  // "of 1,971 GPU calls" read as all of them where 14,531 launches more were seen at entry only
  // (helper-76): their result is not read, and the count says whose is.
  std::string counted = format_count(p.failed) + " of " + (p.unread ? "the " : "") +
                        format_count(p.returned) + " GPU calls" +
                        (p.unread ? " whose result was read" : "");
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
                  " that returned success; " +
                  (returned_after ? "after it, " + format_count(ok_after) + " of " +
                                        format_count(returned_after) + " succeeded."
                                  : "no call returned after it.");
  if (p.first_fail < f.ts)
    c.explanation += " Calls had failed before it, from " + format_wall(p.first_fail) + ".";
  if (p.unread)
    c.explanation += " " + format_count(p.unread) + (p.unread == 1 ? " call has" : " calls have") +
                     " no result to read (launches seen at entry only, --launch-timing; calls "
                     "unfinished at the end).";
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
  c.fixes = fixes_of(cls, f.vendor);
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
  c.score = (fatal(cls) ? 1e8 : 0) + double(p.failed);
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
