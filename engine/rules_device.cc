// Device errors (Xid, ECC, a lost GPU) from the device side channel: evidence in the chains
// whose processes ran on that device when it happened, and a chain of their own. Such a chain
// is HIGH when the error lines up with a stall of a process on that device (a step far slower
// than its median, a call in its op's tail, or the process's last GPU call), LOW otherwise.
#include <algorithm>
#include <map>

#include "engine/analysis.h"
#include "hal/sampler_process.h"

namespace ingero::engine {
namespace {

constexpr int64_t kNearNs = 1'000'000'000;     // an error and a stall this close line up
constexpr int64_t kSilenceNs = 5'000'000'000;  // no GPU call for this long after: stopped
constexpr double kStallFactor = 2.0;           // a step this many times its median
constexpr size_t kMaxEvidencePerChain = 3;

bool is_error(const hal::DeviceEvent& e) {
  return e.kind == "xid" || e.kind == "ecc_uncorrected" || e.kind == "gpu_lost";
}

std::string key_of(const hal::DeviceEvent& e) { return e.source + ":" + std::to_string(e.device); }

bool on_device(const Analysis& a, uint32_t pid, const std::string& key) {
  auto d = a.device.devices_of(pid);
  return std::find(d.begin(), d.end(), key) != d.end();
}

bool on_source(const Analysis& a, uint32_t pid, const std::string& source) {
  for (const std::string& key : a.device.devices_of(pid))
    if (key.rfind(source + ":", 0) == 0) return true;
  return false;
}

std::string what(const hal::DeviceEvent& e) {
  return e.detail.empty() ? e.kind + " " + std::to_string(e.code) : e.detail;
}

// A stall of pid near ts, described; "" when none.
std::string stall_near(const Analysis& a, uint32_t pid, int64_t ts) {
  if (const StepSeries* s = a.steps.find(pid); s && s->summary.median_ns) {
    for (const Step& st : s->steps) {
      if (st.end_ns < ts - kNearNs || st.start_ns > ts + kNearNs) continue;
      if (double(st.duration()) >= kStallFactor * double(s->summary.median_ns))
        return "its step at that time took " + format_duration(st.duration()) + ", " +
               format_count(st.duration() / s->summary.median_ns) + "x its median";
    }
    if (s->last_call_ns && ts + kNearNs >= s->last_call_ns && ts <= s->last_call_ns + kNearNs &&
        a.span.second - s->last_call_ns >= kSilenceNs)
      return "it made no GPU call after " + format_wall(s->last_call_ns) + " (" +
             format_duration(uint64_t(a.span.second - s->last_call_ns)) + " before the trace ends)";
  }
  for (const OpStats& op : a.stats.per_process) {
    if (op.key.pid != pid) continue;
    for (const TailWindow& w : op.tail_windows)
      if (w.end >= ts - kNearNs && w.start <= ts + kNearNs && op.p50 &&
          double(w.end - w.start) >= kStallFactor * double(op.p50))
        return "its " + op.key.op + " took " + format_duration(uint64_t(w.end - w.start)) +
               " (p50 " + format_duration(op.p50) + ")";
  }
  return "";
}

std::vector<std::string> fixes_for(const hal::DeviceEvent& e) {
  if (e.kind == "ecc_uncorrected" ||
      (e.kind == "xid" && (e.code == 48 || e.code == 63 || e.code == 64 || e.code == 94 ||
                           e.code == 95 || e.code == 140)))
    return {
        "Uncorrectable memory errors: drain the node and reset the GPU (pending row "
        "remappings apply at reset); if they come back, have the GPU replaced",
        "Restart the job from its last checkpoint: results computed on that GPU since the "
        "error may be wrong"};
  if (e.kind == "xid" && (e.code == 13 || e.code == 31 || e.code == 43))
    return {
        "Usually the program: an out-of-range access or a faulting kernel; run the step "
        "under compute-sanitizer to find it",
        "If it recurs with known-good code, check the driver and the GPU (dmesg, nvidia-smi "
        "-q)"};
  // The health check by the source's vendor: NVIDIA's tools for NVML's events, AMD's for the
  // amdgpu driver's, the kernel log for any other.
  const std::string check = e.source == "nvml"     ? "dmesg for NVRM Xid lines, nvidia-smi -q"
                            : e.source == "amdgpu" ? "dmesg for amdgpu lines, rocm-smi"
                                                   : "dmesg, the vendor's tools";
  return {"Check the GPU's health (" + check +
              ") and drain the node if it repeats: this is the device or its driver, not the "
              "program",
          "Restart the job from its last checkpoint on a healthy GPU"};
}

// The vendor of a device event's source: NVML's are NVIDIA's, the amdgpu driver's AMD's; any
// other source names itself.
std::string vendor_of_source(const std::string& source) {
  return source == "nvml" ? "nvidia" : source == "amdgpu" ? "amd" : source;
}

}  // namespace

void rule_device_errors(Analysis& a, std::vector<Chain>& out) {
  if (a.device_events.empty()) return;
  // Evidence in the chains already found: errors on a device of their processes, in their
  // window (give or take a second).
  for (Chain& c : out) {
    size_t added = 0;
    for (const hal::DeviceEvent& e : a.device_events) {
      if (added >= kMaxEvidencePerChain) break;
      if (e.ts_ns < c.window_start - kNearNs || e.ts_ns > c.window_end + kNearNs) continue;
      bool mine = false;
      for (uint32_t pid : c.pids)
        mine = mine || (hal::is_sampler_event(e) ? on_source(a, pid, e.source)
                                                 : on_device(a, pid, key_of(e)));
      if (!mine) continue;
      std::string who =
          hal::is_sampler_event(e) ? source_label(e.source) : a.device.device_name(key_of(e));
      c.timeline.push_back(
          {"DEVICE", e.kind, who + ": " + what(e) + " at " + format_wall(e.ts_ns), 0});
      ++added;
    }
  }
  // A chain per device and kind of error.
  std::map<std::pair<std::string, std::string>, std::vector<const hal::DeviceEvent*>> groups;
  for (const hal::DeviceEvent& e : a.device_events)
    if (is_error(e)) groups[{key_of(e), e.kind}].push_back(&e);
  for (const auto& [k, events] : groups) {
    const auto& [key, kind] = k;
    const hal::DeviceEvent& first = *events.front();
    std::vector<uint32_t> pids;
    for (const StepSeries& s : a.steps.processes)
      if (on_device(a, s.pid, key)) pids.push_back(s.pid);
    std::string stall;
    uint32_t stalled = 0;
    const hal::DeviceEvent* at = &first;
    for (const hal::DeviceEvent* e : events)
      for (uint32_t pid : pids)
        if (stall.empty() && !(stall = stall_near(a, pid, e->ts_ns)).empty()) {
          stalled = pid;
          at = e;
        }
    Chain c = new_chain("device_error", vendor_of_source(first.source), first.source, kind, pids,
                        events.front()->ts_ns, events.back()->ts_ns);
    c.id = "device_error:" + key + ":" + kind;
    c.severity = stall.empty() ? Severity::kLow : Severity::kHigh;
    c.score = double(events.size()) + (stall.empty() ? 0 : 1e6);
    std::string dev = a.device.device_name(key);
    std::string count = events.size() == 1 ? "" : " (" + format_count(events.size()) + " times)";
    c.summary = "GPU error: " + dev + " reported " + what(*at) + count + " at " +
                format_wall(at->ts_ns) +
                (stall.empty() ? "; no stall of a traced process lines up with it"
                               : "; " + a.process_label(stalled) + " stalled: " + stall);
    c.root_cause = stall.empty()
                       ? "The device reported an error; no traced step or call slowed down around "
                         "it"
                       : "The device reported an error while " + a.process_name(stalled) +
                             " was using it, and the process stalled then: the stall is the "
                             "device's, not the host's";
    c.explanation = format_count(events.size()) + " " + kind + " event(s) from " + dev + " (" +
                    source_label(first.source) + "), the first at " +
                    format_wall(events.front()->ts_ns) + ", the last at " +
                    format_wall(events.back()->ts_ns) + ".";
    for (size_t i = 0; i < events.size() && i < 5; ++i)
      c.timeline.push_back(
          {"DEVICE", kind, what(*events[i]) + " at " + format_wall(events[i]->ts_ns), 0});
    c.fixes = fixes_for(*at);
    out.push_back(std::move(c));
  }
}

}  // namespace ingero::engine
