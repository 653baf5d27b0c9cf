// The writer's side of the seam's sampled kinds (hal/event_sink.h): each becomes the rows the
// add_* methods write.
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::on_process_stats(int64_t ts_ns, int64_t dur_ns,
                                             const std::vector<hal::ProcessStats>& deltas) {
  ingero::Status out;
  for (const auto& d : deltas) {
    ProcessStatsRow r{ts_ns,         dur_ns,        d.pid,        d.comm,           d.cgroup_id,
                      d.switches,    d.involuntary, d.off_cpu_ns, d.max_off_cpu_ns, d.wakeups,
                      d.page_allocs, d.page_bytes,  d.forks,      d.block_ios,      d.block_bytes,
                      d.block_ns};
    if (auto st = add_process_stats(r); !st) out = st;
  }
  return out;
}

ingero::Status TraceWriter::on_device_counters(int64_t ts_ns, std::string_view backend,
                                               const std::vector<hal::DevicePortSample>& ports) {
  ingero::Status out;
  for (const auto& p : ports)
    for (const auto& c : p.counters)
      if (auto st =
              add_device_counter({ts_ns, std::string(backend), p.device, c.counter, c.unit, p.port,
                                  c.value, c.value * c.factor, c.is_error, p.attributes});
          !st)
        out = st;
  return out;
}

ingero::Status TraceWriter::on_session_counters(const SessionCounters& lost,
                                                const hal::KernelNaming* naming) {
  auto st = update_counters(lost);
  if (naming)
    if (auto n = update_kernel_naming(*naming); !n) return n;
  return st;
}

}  // namespace ingero::store
