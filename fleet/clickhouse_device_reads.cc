// ClickHouseTraceSource's reads of the device side channel (device_counters, device_samples,
// device_events), on the clock of the node that wrote them.
#include <limits>

#include "fleet/clickhouse_rows.h"
#include "fleet/clickhouse_source.h"

namespace ingero::fleet {

std::vector<engine::DeviceCounterSample> ClickHouseTraceSource::device_error_samples(
    const engine::Window& w) {
  std::vector<engine::DeviceCounterSample> out;
  engine::Window wide = w;
  // One sample before the window too, so an increase right at its start is seen.
  if (w.from_ns != std::numeric_limits<int64_t>::min()) wide.from_ns = w.from_ns - 10'000'000'000LL;
  rows(
      "SELECT " + ts("timestamp") + " AS t, backend, device, port, counter, value FROM " +
          table("device_counters") + where(wide, "timestamp", false) +
          " AND is_error = 1 ORDER BY t, node, backend, device, port, counter",
      6, [&](const auto& f) {
        out.push_back({i64(f[0]), f[1].text, f[2].text, uint32_t(u64(f[3])), f[4].text, u64(f[5])});
        return true;
      });
  return out;
}

bool ClickHouseTraceSource::has_table(const char* name) {
  auto it = tables_.find(name);
  if (it != tables_.end()) return it->second;
  bool yes = false;
  std::string before = error_;
  rows(std::string("EXISTS TABLE ") + table(name), 1, [&](const auto& f) {
    yes = u64(f[0]) == 1;
    return true;
  });
  error_ = before;
  return tables_[name] = yes;
}

// The device side channel's rows, on the clock of the node that wrote them. A database
// created before these tables has no device data.
void ClickHouseTraceSource::device_samples(
    const engine::Window& w, const std::function<void(const hal::DeviceSample&)>& fn) {
  if (!has_table("device_samples")) return;
  std::string pid = w.pid ? " AND (isNull(pid) OR pid = " + std::to_string(*w.pid) + ")" : "";
  rows("SELECT " + ts("timestamp") +
           " AS t, period_ns, source, device, uuid, pid, sm_util, mem_util, mem_used, mem_total "
           "FROM " +
           table("device_samples") + where(w, "timestamp", false) +
           " AND (isNotNull(sm_util) OR isNotNull(pid))" + pid,
       10, [&](const auto& f) {
         hal::DeviceSample s;
         s.ts_ns = i64(f[0]);
         s.period_ns = i64(f[1]);
         s.source = f[2].text;
         s.device = uint32_t(u64(f[3]));
         s.uuid = f[4].text;
         if (!f[5].null) s.pid = uint32_t(u64(f[5]));
         if (!f[6].null) s.sm_util = std::stod(f[6].text);
         if (!f[7].null) s.mem_util = std::stod(f[7].text);
         if (!f[8].null) s.mem_used = u64(f[8]);
         if (!f[9].null) s.mem_total = u64(f[9]);
         fn(s);
         return true;
       });
}

std::vector<hal::DeviceEvent> ClickHouseTraceSource::device_events(const engine::Window& w) {
  std::vector<hal::DeviceEvent> out;
  if (!has_table("device_events")) return out;
  rows("SELECT " + ts("timestamp") + " AS t, source, device, uuid, kind, code, detail FROM " +
           table("device_events") + where(w, "timestamp", false) + " ORDER BY t, node",
       7, [&](const auto& f) {
         out.push_back({i64(f[0]), f[1].text, uint32_t(u64(f[2])), f[3].text, f[4].text, i64(f[5]),
                        f[6].text});
         return true;
       });
  return out;
}

}  // namespace ingero::fleet
