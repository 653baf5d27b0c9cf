// The rows of the device side channel (hal/device_sampler.h): utilisation samples and device
// events, written in batches as the tracer drains its device poller. An absent figure is NULL.
#include "store/device_tables.h"
#include "store/trace_writer.h"

namespace ingero::store {
namespace {

template <class T>
void bind_opt(Stmt& st, int i, const std::optional<T>& v) {
  if (!v)
    st.bind_null(i);
  else if constexpr (std::is_floating_point_v<T>)
    st.bind(i, double(*v));
  else
    st.bind(i, int64_t(*v));
}

}  // namespace

// The tables come with the file's first device row; the insert is prepared once.
ingero::Result<Stmt*> TraceWriter::device_insert(Stmt& cached, const char* sql) {
  if (cached) return &cached;
  if (!device_tables_) {
    if (auto st = db_->exec(device_tables_ddl()); !st) return st.error();
    device_tables_ = true;
  }
  auto st = db_->prepare(sql);
  if (!st) return st.error();
  cached = std::move(*st);
  return &cached;
}

void TraceWriter::forget_device_inserts() {
  device_sample_insert_ = Stmt();
  device_event_insert_ = Stmt();
  device_tables_ = false;
}

ingero::Status TraceWriter::add_device_samples(const std::vector<hal::DeviceSample>& rows) {
  if (rows.empty()) return {};
  if (auto st = begin_if_needed(); !st) return st;
  static constexpr const char* kInsert =
      "INSERT INTO device_samples (node, session_id, timestamp, period_ns, source, device, uuid, "
      "pid, sm_util, mem_util, mem_used, mem_total, sm_clock_mhz, mem_clock_mhz, power_mw, "
      "temperature_c, throttle_reasons, ecc_corrected, ecc_uncorrected) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  auto made = device_insert(device_sample_insert_, kInsert);
  if (!made) return made.error();
  Stmt* st = *made;
  for (const auto& r : rows) {
    st->reset();
    st->bind(1, node_)
        .bind(2, session_id_)
        .bind(3, r.ts_ns)
        .bind(4, r.period_ns)
        .bind(5, r.source)
        .bind(6, int64_t(r.device))
        .bind(7, r.uuid);
    bind_opt(*st, 8, r.pid);
    bind_opt(*st, 9, r.sm_util);
    bind_opt(*st, 10, r.mem_util);
    bind_opt(*st, 11, r.mem_used);
    bind_opt(*st, 12, r.mem_total);
    bind_opt(*st, 13, r.sm_clock_mhz);
    bind_opt(*st, 14, r.mem_clock_mhz);
    bind_opt(*st, 15, r.power_mw);
    bind_opt(*st, 16, r.temperature_c);
    bind_opt(*st, 17, r.throttle_reasons);
    bind_opt(*st, 18, r.ecc_corrected);
    bind_opt(*st, 19, r.ecc_uncorrected);
    if (auto x = st->step(); !x) {
      forget_device_inserts();
      return x.error();
    }
  }
  return {};
}

ingero::Status TraceWriter::add_device_events(const std::vector<hal::DeviceEvent>& rows) {
  if (rows.empty()) return {};
  if (auto st = begin_if_needed(); !st) return st;
  static constexpr const char* kInsert =
      "INSERT INTO device_events (node, session_id, timestamp, source, device, uuid, kind, code, "
      "detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
  auto made = device_insert(device_event_insert_, kInsert);
  if (!made) return made.error();
  Stmt* st = *made;
  for (const auto& r : rows) {
    st->reset();
    st->bind(1, node_)
        .bind(2, session_id_)
        .bind(3, r.ts_ns)
        .bind(4, r.source)
        .bind(5, int64_t(r.device))
        .bind(6, r.uuid)
        .bind(7, r.kind)
        .bind(8, r.code)
        .bind(9, r.detail);
    if (auto x = st->step(); !x) {
      forget_device_inserts();
      return x.error();
    }
  }
  return {};
}

}  // namespace ingero::store
