// The device side channel's tables (hal/device_sampler.h): their DDL, added to every file a
// writer opens, and SqlTraceSource's reads of them for the engine.
#include "store/device_tables.h"

#include "store/sql_trace_source.h"
#include "store/table_defs.h"

namespace ingero::store {

const std::string& device_tables_ddl() {
  static const std::string ddl =
      create_table_sql(table_def("device_samples")) + create_table_sql(table_def("device_events"));
  return ddl;
}

void SqlTraceSource::device_samples(const engine::Window& w,
                                    const std::function<void(const hal::DeviceSample&)>& fn) {
  if (!reader_.db().table_exists("device_samples")) return;
  // Whole-device rows whatever the window's pid; per-process rows of its pid.
  std::string where = window_sql(w, "timestamp", false) +
                      " AND (sm_util IS NOT NULL OR pid IS NOT NULL)" +
                      (w.pid ? " AND (pid IS NULL OR pid = " + std::to_string(*w.pid) + ")" : "");
  auto st = prepare(
      "SELECT timestamp, period_ns, source, device, uuid, pid, sm_util, mem_util, mem_used, "
      "mem_total, sm_clock_mhz, mem_clock_mhz, power_mw, temperature_c, throttle_reasons, "
      "ecc_corrected, ecc_uncorrected FROM device_samples" +
      where);
  if (!st) return;
  hal::DeviceSample s;
  auto opt_u = [&](int col) -> std::optional<uint64_t> {
    return st->is_null(col) ? std::nullopt : std::optional<uint64_t>(uint64_t(st->int64(col)));
  };
  auto opt_d = [&](int col) -> std::optional<double> {
    return st->is_null(col) ? std::nullopt : std::optional<double>(st->real(col));
  };
  while (row(*st)) {
    s.ts_ns = st->int64(0);
    s.period_ns = st->int64(1);
    s.source = st->text(2);
    s.device = uint32_t(st->int64(3));
    s.uuid = st->text(4);
    s.pid = st->is_null(5) ? std::nullopt : std::optional<uint32_t>(uint32_t(st->int64(5)));
    s.sm_util = opt_d(6);
    s.mem_util = opt_d(7);
    s.mem_used = opt_u(8);
    s.mem_total = opt_u(9);
    auto u32 = [&](int col) {
      auto v = opt_u(col);
      return v ? std::optional<uint32_t>(uint32_t(*v)) : std::nullopt;
    };
    s.sm_clock_mhz = u32(10);
    s.mem_clock_mhz = u32(11);
    s.power_mw = u32(12);
    s.temperature_c =
        st->is_null(13) ? std::nullopt : std::optional<int32_t>(int32_t(st->int64(13)));
    s.throttle_reasons = opt_u(14);
    s.ecc_corrected = opt_u(15);
    s.ecc_uncorrected = opt_u(16);
    fn(s);
  }
}

std::vector<hal::DeviceEvent> SqlTraceSource::device_events(const engine::Window& w) {
  std::vector<hal::DeviceEvent> out;
  if (!reader_.db().table_exists("device_events")) return out;
  auto st =
      prepare("SELECT timestamp, source, device, uuid, kind, code, detail FROM device_events" +
              window_sql(w, "timestamp", false) + " ORDER BY timestamp, id");
  if (!st) return out;
  while (row(*st))
    out.push_back({st->int64(0), st->text(1), uint32_t(st->int64(2)), st->text(3), st->text(4),
                   st->int64(5), st->text(6)});
  return out;
}

}  // namespace ingero::store
