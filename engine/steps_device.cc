// The step model, part 4: the GPU side measured where the devices reported it (NVML, amdgpu
// sysfs), and how the summary names the GPU's share either way.
#include <cstdio>

#include "engine/chain.h"
#include "engine/steps_internal.h"

namespace ingero::engine {
std::string gpu_share_text(const StepSummary& m) {
  if (m.busy_measured)
    return "GPU busy " + pct(m.gpu_busy) + " (" + source_label(m.busy_source) +
           (m.busy_per_process ? "" : ", whole device") + ")";
  std::string why = !m.device_data           ? "no device data"
                    : !m.device_note.empty() ? m.device_note
                                             : "device data covers " + format_count(m.busy_steps) +
                                                   " of " + format_count(m.steps) + " steps";
  return "GPU idle \u2265 " + pct_at_least(m.gpu_idle) + " (" + why + ": lower bound)";
}

namespace steps_detail {

void measure_steps(StepSeries& s, const DeviceBusy* device) {
  StepSummary& m = s.summary;
  if (!device || device->empty()) return;
  m.device_data = true;
  if (device->devices_of(s.pid).empty())
    m.device_note = format_count(device->devices()) + " devices sampled, none known to be pid " +
                    std::to_string(s.pid) + "'s";
  uint64_t total = 0, covered = 0, own = 0;
  double busy = 0;
  for (Step& st : s.steps) {
    auto x = device->measure(s.pid, st.start_ns, st.end_ns);
    if (x) {
      st.gpu_busy = float(x->busy);
      st.busy_per_process = x->per_process;
    }
    if (st.warmup) continue;
    total += st.duration();
    if (!x) continue;
    ++m.busy_steps;
    covered += st.duration();
    busy += x->busy * double(st.duration());
    if (x->per_process) own += st.duration();
    if (m.busy_source.empty()) m.busy_source = x->source;
  }
  // Measured when the samples cover at least half of the steady time.
  if (covered && 2 * covered >= total) {
    m.busy_measured = true;
    m.gpu_busy = busy / double(covered);
    // Per process when the process's own samples measured most of it (the first steps may come
    // before its first sample, and fall back to the device's).
    m.busy_per_process = 2 * own >= covered;
  }
}

}  // namespace steps_detail
}  // namespace ingero::engine
