#include "app/sql_trace_source.h"

#include <chrono>
#include <ctime>

#include "app/tracer.h"
#include "hal/symbolizer.h"
#include "store/stacks.h"

namespace ingero::app {
namespace {

uint64_t direction_code(const std::string& s) {
  if (s == "H2H") return 0;
  if (s == "H2D") return 1;
  if (s == "D2H") return 2;
  if (s == "D2D") return 3;
  if (s == "default") return 4;
  if (s == "peer") return 5;
  return 4;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

std::string window_sql(const engine::Window& w, const char* ts, bool with_pid,
                       bool with_node = true) {
  std::string s = std::string(" WHERE ") + ts + " BETWEEN " + std::to_string(w.from_ns) + " AND " +
                  std::to_string(w.to_ns);
  if (with_pid && w.pid) s += " AND pid = " + std::to_string(*w.pid);
  if (with_node && w.node) s += " AND node = " + quote(*w.node);
  return s;
}

}  // namespace

std::string_view SqlTraceSource::intern(std::string s) {
  return *strings_.insert(std::move(s)).first;
}

store::Stmt SqlTraceSource::prepare(const std::string& sql) {
  auto st = reader_.db().prepare(sql);
  if (!st) {
    if (error_.empty()) error_ = st.error().message;
    return store::Stmt();
  }
  return std::move(*st);
}

void SqlTraceSource::calls(const engine::Window& w, const engine::EventFn& fn) {
  std::string sql =
      "SELECT ts_ns, dur_ns, pid, tid, comm, cgroup_id, vendor, api, kind, op, ret, status, "
      "off_cpu_ns, preempts, switches, preemptor_pid, preemptor_comm, bytes, direction, graph, "
      "graph_exec, err_class, stream, stack_hash, library_id, rank, nranks, comm_hash, "
      "communicator, "
      "count, datatype, peer FROM calls" +
      window_sql(w, "ts_ns", true) + " ORDER BY ts_ns";
  store::Stmt st = prepare(sql);
  if (!st) return;
  sqlite3_stmt* s = st.get();
  hal::Event e;
  while (sqlite3_step(s) == SQLITE_ROW) {
    e = hal::Event{};
    e.ts_ns = uint64_t(sqlite3_column_int64(s, 0));
    e.dur_ns = uint64_t(sqlite3_column_int64(s, 1));
    e.pid = uint32_t(sqlite3_column_int64(s, 2));
    e.tid = uint32_t(sqlite3_column_int64(s, 3));
    e.set_comm(st.text(4));
    e.cgroup_id = uint64_t(sqlite3_column_int64(s, 5));
    e.vendor = intern(st.text(6));
    e.api = intern(st.text(7));
    e.kind = hal::kind_from_name(st.text(8)).value_or(hal::EventKind::kUnknown);
    e.op = intern(st.text(9));
    std::string status = st.text(11);
    e.unfinished = status == "unfinished";
    e.has_ret = !st.is_null(10);
    e.ret = sqlite3_column_int64(s, 10);
    e.off_cpu_ns = uint64_t(sqlite3_column_int64(s, 12));
    e.preempts = uint32_t(sqlite3_column_int64(s, 13));
    e.switches = uint32_t(sqlite3_column_int64(s, 14));
    if (!st.is_null(15)) e.set(hal::Field::kPeerPid, uint64_t(sqlite3_column_int64(s, 15)));
    e.set_peer_comm(st.text(16));
    if (!st.is_null(17)) e.set(hal::Field::kBytes, uint64_t(sqlite3_column_int64(s, 17)));
    if (!st.is_null(18)) e.set(hal::Field::kDirection, direction_code(st.text(18)));
    if (!st.is_null(19)) e.set(hal::Field::kGraph, uint64_t(sqlite3_column_int64(s, 19)));
    if (!st.is_null(20)) e.set(hal::Field::kGraphExec, uint64_t(sqlite3_column_int64(s, 20)));
    if (!st.is_null(21)) e.set(hal::Field::kErrClass, uint64_t(sqlite3_column_int64(s, 21)));
    if (!st.is_null(22)) e.set(hal::Field::kStream, uint64_t(sqlite3_column_int64(s, 22)));
    e.stack_id = uint64_t(sqlite3_column_int64(s, 23));
    static constexpr hal::Field kTail[] = {
        hal::Field::kRank,  hal::Field::kNranks,   hal::Field::kCommHash, hal::Field::kComm,
        hal::Field::kCount, hal::Field::kDatatype, hal::Field::kPeer};
    for (int i = 0; i < 7; ++i)
      if (!st.is_null(25 + i)) e.set(kTail[i], uint64_t(sqlite3_column_int64(s, 25 + i)));
    fn(e);
  }
}

void SqlTraceSource::host_events(const engine::Window& w, const engine::EventFn& fn) {
  std::string sql =
      "SELECT ts_ns, dur_ns, pid, tid, comm, cgroup_id, event, kind, cpu, state, peer_pid, "
      "peer_tid, peer_comm, bytes, count, flags, peer_cgroup, code FROM host_events" +
      window_sql(w, "ts_ns", false) + " ORDER BY ts_ns";
  store::Stmt st = prepare(sql);
  if (!st) return;
  sqlite3_stmt* s = st.get();
  std::string_view vendor = intern("host"), api = intern("kernel");
  hal::Event e;
  while (sqlite3_step(s) == SQLITE_ROW) {
    e = hal::Event{};
    e.ts_ns = uint64_t(sqlite3_column_int64(s, 0));
    e.dur_ns = uint64_t(sqlite3_column_int64(s, 1));
    e.pid = uint32_t(sqlite3_column_int64(s, 2));
    e.tid = uint32_t(sqlite3_column_int64(s, 3));
    e.set_comm(st.text(4));
    e.cgroup_id = uint64_t(sqlite3_column_int64(s, 5));
    e.vendor = vendor;
    e.api = api;
    e.op = intern(st.text(6));
    e.kind = hal::kind_from_name(st.text(7)).value_or(hal::EventKind::kUnknown);
    auto opt = [&](int col, hal::Field f) {
      if (!st.is_null(col)) e.set(f, uint64_t(sqlite3_column_int64(s, col)));
    };
    opt(8, hal::Field::kCpu);
    opt(9, hal::Field::kState);
    opt(10, hal::Field::kPeerPid);
    opt(11, hal::Field::kPeerTid);
    e.set_peer_comm(st.text(12));
    opt(13, hal::Field::kBytes);
    opt(14, hal::Field::kCount);
    opt(15, hal::Field::kFlags);
    opt(16, hal::Field::kPeerCgroup);
    if (!st.is_null(17)) {
      e.has_ret = true;
      e.ret = sqlite3_column_int64(s, 17);
    }
    fn(e);
  }
}

std::vector<engine::SnapshotRow> SqlTraceSource::snapshots(const engine::Window& w) {
  std::vector<engine::SnapshotRow> out;
  if (!reader_.db().table_exists("system_snapshots")) return out;
  bool node_col = reader_.db().column_exists("system_snapshots", "node");
  store::Stmt st = prepare(
      "SELECT timestamp, cpu_pct, mem_pct, mem_avail, swap_mb, load_avg FROM system_snapshots" +
      window_sql(w, "timestamp", false, node_col) + " ORDER BY timestamp");
  if (!st) return out;
  while (sqlite3_step(st.get()) == SQLITE_ROW) {
    engine::SnapshotRow r;
    r.ts_ns = st.int64(0);
    r.cpu_pct = st.real(1);
    r.mem_pct = st.real(2);
    r.mem_avail_mb = st.int64(3);
    r.swap_mb = st.int64(4);
    r.load_avg = st.real(5);
    out.push_back(r);
  }
  return out;
}

std::map<uint32_t, engine::ProcessActivity> SqlTraceSource::process_activity(
    const engine::Window& w) {
  std::map<uint32_t, engine::ProcessActivity> out;
  if (reader_.db().table_exists("process_stats")) {
    store::Stmt st = prepare(
        "SELECT pid, max(comm), sum(switches), sum(involuntary), sum(off_cpu_ns), "
        "max(max_off_cpu_ns), "
        "sum(wakeups), sum(page_allocs), sum(page_bytes), sum(forks), sum(block_ios), "
        "sum(block_bytes), "
        "sum(block_ns) FROM process_stats" +
        window_sql(w, "timestamp", false) + " GROUP BY pid");
    if (!st) return out;
    while (sqlite3_step(st.get()) == SQLITE_ROW) {
      engine::ProcessActivity a;
      a.pid = uint32_t(st.int64(0));
      a.comm = st.text(1);
      a.switches = uint64_t(st.int64(2));
      a.involuntary = uint64_t(st.int64(3));
      a.off_cpu_ns = uint64_t(st.int64(4));
      a.max_off_cpu_ns = uint64_t(st.int64(5));
      a.wakeups = uint64_t(st.int64(6));
      a.page_allocs = uint64_t(st.int64(7));
      a.page_bytes = uint64_t(st.int64(8));
      a.forks = uint64_t(st.int64(9));
      a.block_ios = uint64_t(st.int64(10));
      a.block_bytes = uint64_t(st.int64(11));
      a.block_ns = uint64_t(st.int64(12));
      out[a.pid] = a;
    }
  } else if (reader_.is_legacy() && reader_.db().table_exists("event_aggregates")) {
    // The original implementation counted page allocations per pid and minute (source 3,
    // op 3: mm_page_alloc; sum_arg0 = bytes).
    std::string from = std::to_string(w.from_ns - 60'000'000'000LL), to = std::to_string(w.to_ns);
    store::Stmt st = prepare(
        "SELECT a.pid, coalesce(max(pn.name), ''), sum(a.count), sum(a.sum_arg0) FROM "
        "event_aggregates a "
        "JOIN ops o ON o.source_id = a.source AND o.op_id = a.op "
        "LEFT JOIN process_names pn ON pn.pid = a.pid "
        "WHERE o.name = 'mm_page_alloc' AND a.bucket BETWEEN " +
        from + " AND " + to + " GROUP BY a.pid");
    if (!st) return out;
    while (sqlite3_step(st.get()) == SQLITE_ROW) {
      engine::ProcessActivity a;
      a.pid = uint32_t(st.int64(0));
      a.comm = st.text(1);
      a.page_allocs = uint64_t(st.int64(2));
      a.page_bytes = uint64_t(st.int64(3));
      out[a.pid] = a;
    }
  }
  return out;
}

std::map<uint32_t, engine::ProcessInfo> SqlTraceSource::processes() {
  std::map<uint32_t, engine::ProcessInfo> out;
  bool has_cmd = reader_.db().column_exists("process_names", "cmdline");
  store::Stmt st = prepare(std::string("SELECT pid, name, ") + (has_cmd ? "cmdline" : "''") +
                           " FROM process_names");
  if (!st) return out;
  while (sqlite3_step(st.get()) == SQLITE_ROW) {
    engine::ProcessInfo p;
    p.pid = uint32_t(st.int64(0));
    p.name = st.text(1);
    p.cmdline = st.text(2);
    out[p.pid] = p;
  }
  return out;
}

std::vector<std::string> SqlTraceSource::nodes() {
  std::vector<std::string> out;
  if (!reader_.db().column_exists("events", "node")) return out;
  store::Stmt st = prepare("SELECT DISTINCT node FROM events ORDER BY node");
  if (!st) return out;
  while (sqlite3_step(st.get()) == SQLITE_ROW) out.push_back(st.text(0));
  return out;
}

std::pair<int64_t, int64_t> SqlTraceSource::time_span() {
  store::Stmt st = prepare("SELECT min(timestamp), max(timestamp + duration) FROM events");
  if (!st || sqlite3_step(st.get()) != SQLITE_ROW || st.is_null(0)) return {0, 0};
  return {st.int64(0), st.int64(1)};
}

uint64_t SqlTraceSource::event_count(const engine::Window& w) {
  std::string sql = "SELECT count(*) FROM events" +
                    window_sql(w, "timestamp", false, reader_.db().column_exists("events", "node"));
  store::Stmt st = prepare(sql);
  if (!st || sqlite3_step(st.get()) != SQLITE_ROW) return 0;
  return uint64_t(st.int64(0));
}

std::vector<engine::RdmaSample> SqlTraceSource::rdma_error_samples(const engine::Window& w) {
  std::vector<engine::RdmaSample> out;
  if (!reader_.db().table_exists("rdma_counters")) return out;
  // One sample before the window too, so an increase right at its start is seen.
  engine::Window wide = w;
  wide.from_ns = w.from_ns == INT64_MIN ? w.from_ns : w.from_ns - 10'000'000'000LL;
  store::Stmt st =
      prepare("SELECT timestamp, device, port, counter, value FROM rdma_counters" +
              window_sql(wide, "timestamp", false) + " AND is_error = 1 ORDER BY timestamp");
  if (!st) return out;
  while (sqlite3_step(st.get()) == SQLITE_ROW)
    out.push_back(
        {st.int64(0), st.text(1), uint32_t(st.int64(2)), st.text(3), uint64_t(st.int64(4))});
  return out;
}

std::map<uint64_t, std::string> SqlTraceSource::cgroup_paths() {
  std::map<uint64_t, std::string> out;
  if (!reader_.db().table_exists("cgroup_metadata")) return out;
  store::Stmt st = prepare("SELECT cgroup_id, cgroup_path FROM cgroup_metadata");
  if (!st) return out;
  while (sqlite3_step(st.get()) == SQLITE_ROW) out[uint64_t(st.int64(0))] = st.text(1);
  return out;
}

namespace {

// "2026-04-03T12:18:02Z", "2026-04-03 12:18:02", or Unix ns/s digits.
std::optional<int64_t> parse_time(const std::string& s) {
  if (s.empty()) return std::nullopt;
  bool digits = s.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    int64_t v = std::stoll(s);
    return v < 100'000'000'000LL ? v * 1'000'000'000 : v;  // seconds or ns
  }
  std::tm tm{};
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) end = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!end) return std::nullopt;
  return int64_t(timegm(&tm)) * 1'000'000'000;
}

}  // namespace

bool SqlTraceSource::has_stacks() { return store::has_stacks(reader_.db()); }

std::vector<engine::StackFrameInfo> SqlTraceSource::stack(uint64_t stack_id) {
  std::vector<engine::StackFrameInfo> out;
  auto frames = store::read_stack(reader_.db(), int64_t(stack_id));
  if (!frames) {
    if (error_.empty()) error_ = frames.error().message;
    return out;
  }
  if (!*frames) return out;
  for (const auto& f : **frames)
    out.push_back({f.python, f.python ? f.function : hal::demangle(f.function), f.file, f.line,
                   f.module, f.address});
  return out;
}

ingero::Result<engine::Window> resolve_window(engine::TraceSource& source, const WindowSpec& spec) {
  engine::Window w;
  w.pid = spec.pid;
  auto span = source.time_span();
  if (!spec.since.empty()) {
    double s = parse_duration_s(spec.since);
    if (s <= 0) return ingero::make_error("bad --since '" + spec.since + "' (use 30s, 5m, 1h)");
    w.from_ns = span.second - int64_t(s * 1e9);
  }
  if (!spec.from.empty()) {
    auto t = parse_time(spec.from);
    if (!t)
      return ingero::make_error("bad --from '" + spec.from +
                                "' (use 2026-04-03T12:18:02 or Unix seconds)");
    w.from_ns = *t;
  }
  if (!spec.to.empty()) {
    auto t = parse_time(spec.to);
    if (!t) return ingero::make_error("bad --to '" + spec.to + "'");
    w.to_ns = *t;
  }
  if (w.from_ns > w.to_ns) return ingero::make_error("--from is after --to");
  return w;
}

}  // namespace ingero::app
