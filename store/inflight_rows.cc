#include "store/inflight_rows.h"

#include "store/schema.h"

namespace ingero::store {

ingero::Result<std::vector<engine::InflightRow>> read_inflight(Db& db, const InflightFilter& f,
                                                              StringPool& strings) {
  std::vector<engine::InflightRow> out;
  if (!db.table_exists("inflight")) return out;
  std::string sql =
      "SELECT node, what, status, pid, tid, comm, vendor, api, kind, op, entered_at, seen_at, "
      "ended_at, dur_ns, state, state_since, off_cpu_ns, stack_hash, seq, others_running, "
      "others_sleeping, others_io";
  const auto& fields = field_columns();
  for (const auto& c : fields) sql += ", " + c;
  // Stuck from entered_at to seen_at (a row that ended was last seen at its end).
  sql += " FROM inflight WHERE entered_at <= " + std::to_string(f.to_ns) +
         " AND seen_at >= " + std::to_string(f.from_ns);
  if (f.node) sql += " AND node = " + sql_quote(*f.node);
  if (f.pid) sql += " AND pid = " + std::to_string(*f.pid);
  if (f.session_id) sql += " AND session_id = " + std::to_string(*f.session_id);
  if (f.current) sql += " AND status = 'in_flight'";
  sql += " ORDER BY entered_at, id";
  auto st = db.prepare(sql);
  if (!st) return st.error();
  constexpr int kFields = 22;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    engine::InflightRow row;
    row.node = st->text(0);
    hal::Inflight& in = row.in;
    in.what = hal::inflight_what_from_name(st->text_view(1)).value_or(hal::Inflight::What::kCall);
    in.status =
        hal::inflight_status_from_name(st->text_view(2)).value_or(hal::Inflight::Status::kInFlight);
    hal::Event& e = in.call;
    e.pid = uint32_t(st->int64(3));
    e.tid = uint32_t(st->int64(4));
    e.set_comm(st->text_view(5));
    e.vendor = strings.intern(st->text_view(6));
    e.api = strings.intern(st->text_view(7));
    e.kind = hal::kind_from_name(st->text_view(8)).value_or(hal::EventKind::kUnknown);
    e.op = strings.intern(st->text_view(9));
    e.ts_ns = uint64_t(st->int64(10));
    in.seen_ns = uint64_t(st->int64(11));
    in.ended_ns = uint64_t(st->int64(12));
    e.dur_ns = uint64_t(st->int64(13));
    in.state = hal::thread_state_from_name(st->text_view(14)).value_or(hal::ThreadState::kUnknown);
    in.state_since_ns = uint64_t(st->int64(15));
    e.off_cpu_ns = uint64_t(st->int64(16));
    in.stack_id = uint64_t(st->int64(17));
    e.stack_id = in.stack_id;
    in.seq = st->is_null(18) ? hal::kNoSeq : uint64_t(st->int64(18));
    in.others_running = uint32_t(st->int64(19));
    in.others_sleeping = uint32_t(st->int64(20));
    in.others_io = uint32_t(st->int64(21));
    e.timed = false;
    e.unfinished = in.status == hal::Inflight::Status::kUnfinished;
    for (size_t i = 0; i < fields.size(); ++i)
      if (!st->is_null(kFields + int(i))) e.set(hal::Field(i), uint64_t(st->int64(kFields + int(i))));
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace ingero::store
