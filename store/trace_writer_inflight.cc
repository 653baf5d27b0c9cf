// The `inflight` table (store/table_defs.h): the latest observation of each stuck thread. A
// new observation replaces the row of the same call (or idle episode) with a new id, so the
// shipper, which ships rows by id, sends every version; the file keeps one row per call. The
// new row is inserted before the old one is deleted: its id is then above every id the file
// ever held (SQLite gives max(id) + 1, which would reuse the id of a deleted last row, and the
// shipper, past that id already, would never send the new version).
#include "store/schema.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::on_inflight(const hal::InflightReport& report) {
  for (size_t i = 0; i < report.current.size(); ++i)
    if (i < report.changed.size() && report.changed[i])
      if (auto st = add_inflight(report.current[i]); !st) return st;
  for (const auto& row : report.ended)
    if (auto st = add_inflight(row); !st) return st;
  return {};
}

ingero::Status TraceWriter::add_inflight(const hal::Inflight& r) {
  if (auto st = begin_if_needed(); !st) return st;
  if (!insert_inflight_) {
    std::string cols =
        "node, session_id, what, status, pid, tid, comm, vendor, api, kind, op, entered_at, "
        "reported_at, seen_at, ended_at, dur_ns, thread_state, thread_state_since, off_cpu_ns, "
        "stack_hash, seq, "
        "others_running, others_sleeping, others_io";
    std::string marks = "?";
    for (int i = 1; i < 24; ++i) marks += ", ?";
    for (const auto& f : field_columns()) {
      cols += ", " + f;
      marks += ", ?";
    }
    auto ins = db_->prepare("INSERT INTO inflight (" + cols + ") VALUES (" + marks + ")");
    if (!ins) return ins.error();
    insert_inflight_ = std::move(*ins);
    auto del = db_->prepare(
        "DELETE FROM inflight WHERE session_id = ? AND tid = ? AND entered_at = ? AND what = ? "
        "AND id < ?");
    if (!del) return del.error();
    delete_inflight_ = std::move(*del);
  }
  const hal::Event& e = r.call;
  // An empty view may have no storage: bound as is, SQLite would store NULL.
  auto text = [](std::string_view v) { return v.data() ? v : std::string_view(""); };
  int64_t entered = to_wall(e.ts_ns);
  std::string_view what = hal::inflight_what_name(r.what);
  Stmt& s = insert_inflight_;
  s.reset();
  s.bind(1, node_)
      .bind(2, session_id_)
      .bind(3, what)
      .bind(4, hal::inflight_status_name(r.status))
      .bind(5, int64_t(e.pid))
      .bind(6, int64_t(e.tid))
      .bind(7, e.comm_view())
      .bind(8, text(e.vendor))
      .bind(9, text(e.api))
      .bind(10, r.what == hal::Inflight::What::kCall ? hal::kind_name(e.kind) : "")
      .bind(11, text(e.op))
      .bind(12, entered)
      .bind(13, r.reported_ns ? to_wall(r.reported_ns) : int64_t(0))
      .bind(14, to_wall(r.seen_ns))
      .bind(15, r.ended_ns ? to_wall(r.ended_ns) : int64_t(0))
      .bind(16, int64_t(e.dur_ns))
      .bind(17, hal::thread_state_name(r.state))
      .bind(18, r.state_since_ns ? to_wall(r.state_since_ns) : int64_t(0))
      .bind(19, int64_t(e.off_cpu_ns))
      .bind(20, int64_t(r.stack_id));
  if (r.seq == hal::kNoSeq)
    s.bind_null(21);
  else
    s.bind(21, int64_t(r.seq));
  s.bind(22, int64_t(r.others_running))
      .bind(23, int64_t(r.others_sleeping))
      .bind(24, int64_t(r.others_io));
  for (size_t i = 0; i < hal::kFieldCount; ++i) {
    auto v = e.get(hal::Field(i));
    if (v)
      s.bind(25 + int(i), int64_t(*v));
    else
      s.bind_null(25 + int(i));
  }
  if (auto x = s.step(); !x) return x.error();
  delete_inflight_.reset();
  delete_inflight_.bind(1, session_id_)
      .bind(2, int64_t(e.tid))
      .bind(3, entered)
      .bind(4, what)
      .bind(5, int64_t(sqlite3_last_insert_rowid(db_->handle())));
  if (auto x = delete_inflight_.step(); !x) return x.error();
  return {};
}

}  // namespace ingero::store
