#include "store/trace_queries.h"

#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/sqlite_db.h"

namespace ingero::store {
namespace {

// Runs `sql` (with `node` bound as parameter 1 when given) and hands each row to `fn`.
ingero::Status each_row(Db& db, const std::string& sql, const NodeFilter& node,
                        const std::function<ingero::Status(const Stmt&)>& fn) {
  auto st = db.prepare(sql);
  if (!st) return st.error();
  if (node) st->bind(1, *node);
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) return {};
    if (auto s = fn(*st); !s) return s;
  }
}

std::string where_node(Db& db, const char* table, const NodeFilter& node) {
  return node && db.column_exists(table, "node") ? " WHERE node = ?" : "";
}

}  // namespace

ingero::Result<std::vector<std::string>> read_nodes(Db& db) {
  std::vector<std::string> out;
  if (!db.column_exists("events", "node")) return out;
  auto st = each_row(db, node_names_sql(db), std::nullopt, [&](const Stmt& s) -> ingero::Status {
    out.push_back(s.text(0));
    return {};
  });
  if (!st) return st.error();
  return out;
}

ingero::Result<std::optional<int64_t>> first_event_ns(Db& db) {
  return db.query_int(first_timestamp_sql(db));
}

ingero::Result<std::vector<ProcessNameRow>> read_process_names(Db& db, const NodeFilter& node) {
  std::vector<ProcessNameRow> out;
  std::string where = where_node(db, "process_names", node);
  std::string cmd = db.column_exists("process_names", "cmdline") ? "cmdline" : "''";
  auto st = each_row(db, "SELECT pid, name, " + cmd + " FROM process_names" + where,
                     where.empty() ? std::nullopt : node, [&](const Stmt& s) -> ingero::Status {
                       out.push_back({uint32_t(s.int64(0)), s.text(1), s.text(2)});
                       return {};
                     });
  if (!st) return st.error();
  return out;
}

ingero::Result<std::vector<SnapshotRow>> read_snapshots(Db& db, const NodeFilter& node) {
  std::vector<SnapshotRow> out;
  if (!db.table_exists("system_snapshots")) return out;
  std::string where = where_node(db, "system_snapshots", node);
  auto st = each_row(
      db,
      "SELECT timestamp, cpu_pct, mem_pct, load_avg, mem_avail, swap_mb FROM system_snapshots" +
          where + " ORDER BY timestamp",
      where.empty() ? std::nullopt : node, [&](const Stmt& s) -> ingero::Status {
        out.push_back({s.int64(0), s.real(1), s.real(2), s.real(3), s.int64(4), s.int64(5), 0});
        return {};
      });
  if (!st) return st.error();
  return out;
}

ingero::Result<LossSums> read_loss_sums(Db& db, const NodeFilter& node) {
  LossSums l;
  if (!db.table_exists("sessions")) return l;
  l.by_kind = db.column_exists("sessions", "call_drops");
  uint64_t* out[] = {&l.ringbuf_drops,      &l.call_drops,       &l.stack_drops,
                     &l.host_drops,         &l.sample_drops,     &l.lost_calls,
                     &l.calls_lost_at_exit, &l.unfinished_calls, &l.store_errors};
  const char* cols[] = {"ringbuf_drops",      "call_drops",       "stack_drops",
                        "host_drops",         "sample_drops",     "lost_calls",
                        "calls_lost_at_exit", "unfinished_calls", "store_errors"};
  std::string sql;
  for (const char* c : cols)
    sql += std::string(sql.empty() ? "SELECT " : ", ") +
           (db.column_exists("sessions", c) ? "coalesce(sum(" + std::string(c) + "), 0)" : "0");
  std::string where = where_node(db, "sessions", node);
  auto st = each_row(db, sql + " FROM sessions" + where, where.empty() ? std::nullopt : node,
                     [&](const Stmt& s) -> ingero::Status {
                       for (int i = 0; i < 9; ++i) *out[i] = uint64_t(s.int64(i));
                       return {};
                     });
  if (!st) return st.error();
  return l;
}

ingero::Result<SessionCounters> read_losses(Db& db, const NodeFilter& node) {
  auto l = read_loss_sums(db, node);
  if (!l) return l.error();
  SessionCounters c;
  c.call_drops = l->by_kind ? l->call_drops : l->ringbuf_drops;
  c.stack_drops = l->stack_drops;
  c.host_drops = l->host_drops;
  c.sample_drops = l->sample_drops;
  c.lost_calls = l->lost_calls;
  c.calls_lost_at_exit = l->calls_lost_at_exit;
  c.unfinished_calls = l->unfinished_calls;
  c.store_errors = l->store_errors;
  return c;
}

ingero::Result<int64_t> read_stopped_at(Db& db, const NodeFilter& node) {
  int64_t out = 0;
  auto last = [&](const char* table, const char* col) -> ingero::Status {
    if (out || !db.column_exists(table, col)) return {};
    std::string where = where_node(db, table, node);
    return each_row(db, "SELECT coalesce(max(" + std::string(col) + "), 0) FROM " + table + where,
                    where.empty() ? std::nullopt : node, [&](const Stmt& s) -> ingero::Status {
                      out = s.int64(0);
                      return {};
                    });
  };
  if (auto st = last("sessions", "stopped_at"); !st) return st.error();
  if (auto st = has_host_store(db)   ? last("host_store", "last_ts")
                : has_call_store(db) ? last("host_rows", "timestamp")
                                     : last("events", "timestamp");
      !st)
    return st.error();
  if (has_call_store(db))
    if (auto st = last("call_store", "end_ts"); !st) return st.error();
  return out;
}

ingero::Result<std::vector<SessionIdentity>> read_session_identities(Db& db,
                                                                     const NodeFilter& node) {
  std::vector<SessionIdentity> out;
  if (!db.column_exists("sessions", "started_at")) return out;
  std::optional<Stmt> sources;
  if (db.table_exists("merged_sessions")) {
    auto st = db.prepare(
        "SELECT node, host, started_at FROM merged_sessions WHERE session_id = ? "
        "ORDER BY started_at, node, host");
    if (!st) return st.error();
    sources = std::move(*st);
  }
  const std::string node_col = db.column_exists("sessions", "node") ? "node" : "''";
  const std::string host_col = db.column_exists("sessions", "host") ? "host" : "''";
  std::string where = where_node(db, "sessions", node);
  auto st = each_row(db,
                     "SELECT id, " + node_col + ", " + host_col + ", started_at FROM sessions" +
                         where + " ORDER BY id",
                     where.empty() ? std::nullopt : node, [&](const Stmt& s) -> ingero::Status {
                       size_t before = out.size();
                       if (sources) {
                         sources->reset();
                         sources->bind(1, s.int64(0));
                         while (true) {
                           auto r = sources->step();
                           if (!r) return r.error();
                           if (!*r) break;
                           out.push_back({sources->text(0), sources->text(1), sources->int64(2)});
                         }
                       }
                       if (out.size() == before) out.push_back({s.text(1), s.text(2), s.int64(3)});
                       return {};
                     });
  if (!st) return st.error();
  return out;
}

ingero::Result<std::vector<LibraryRow>> read_late_libraries(Db& db, const NodeFilter& node) {
  std::vector<LibraryRow> out;
  if (!db.column_exists("libraries", "late_pid")) return out;
  bool by_node = node && db.column_exists("sessions", "node");
  auto st = each_row(
      db,
      "SELECT l.backend, l.vendor, l.api, l.path, l.soname, l.version, l.build_id, l.embedded, "
      "l.specs_total, l.specs_resolved, l.probes_attached, l.late_pid, l.late_ns FROM libraries "
      "l LEFT JOIN sessions s ON s.id = l.session_id WHERE l.late_pid <> 0" +
          std::string(by_node ? " AND s.node = ?" : "") + " ORDER BY l.id",
      by_node ? node : std::nullopt, [&](const Stmt& s) -> ingero::Status {
        LibraryRow r;
        r.backend = s.text(0);
        r.vendor = s.text(1);
        r.api = s.text(2);
        r.path = s.text(3);
        r.soname = s.text(4);
        r.version = s.text(5);
        r.build_id = s.text(6);
        r.embedded = s.int64(7) != 0;
        r.specs_total = uint64_t(s.int64(8));
        r.specs_resolved = uint64_t(s.int64(9));
        r.probes_attached = uint64_t(s.int64(10));
        r.late_pid = uint32_t(s.int64(11));
        r.late_ns = s.int64(12);
        out.push_back(std::move(r));
        return {};
      });
  if (!st) return st.error();
  return out;
}

ingero::Status for_each_stack(
    Db& db,
    const std::function<ingero::Status(uint64_t, const std::vector<hal::StackFrame>&)>& fn) {
  if (!db.table_exists("stack_frames")) return {};
  int64_t current = 0;
  std::vector<hal::StackFrame> frames;
  auto flush = [&]() -> ingero::Status {
    if (frames.empty()) return {};
    auto s = fn(uint64_t(current), frames);
    frames.clear();
    return s;
  };
  auto st = each_row(db,
                     "SELECT stack_id, kind, module, module_offset, build_id, function, file, "
                     "line FROM stack_frames ORDER BY stack_id, frame",
                     std::nullopt, [&](const Stmt& s) -> ingero::Status {
                       if (s.int64(0) != current)
                         if (auto x = flush(); !x) return x;
                       current = s.int64(0);
                       hal::StackFrame f;
                       f.python = s.text(1) == "python";
                       f.module = s.text(2);
                       if (!s.is_null(3)) f.module_offset = uint64_t(s.int64(3));
                       f.build_id = s.text(4);
                       f.function = s.text(5);
                       f.file = s.text(6);
                       f.line = s.is_null(7) ? 0 : s.int64(7);
                       frames.push_back(std::move(f));
                       return {};
                     });
  if (!st) return st;
  return flush();
}

ingero::Status for_each_legacy_stack(
    Db& db, const std::function<ingero::Status(const LegacyStackRow&)>& fn) {
  if (!db.table_exists("stack_traces")) return {};
  return each_row(db, "SELECT hash, ips, frames FROM stack_traces", std::nullopt,
                  [&](const Stmt& s) {
                    return fn({s.int64(0), s.text(1), s.text(2)});
                  });
}

}  // namespace ingero::store
