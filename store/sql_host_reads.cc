// SqlTraceSource: what host context reads (host events, snapshots, per-process activity,
// cgroups, device error counters) and the on-CPU samples. The calls, the trace's extent and
// the summaries are read in sql_trace_source.cc.
#include "store/call_store.h"
#include "store/cgroup_metadata.h"
#include "store/inflight_rows.h"
#include "store/read_snapshot.h"
#include "store/sql_trace_source.h"

namespace ingero::store {

void SqlTraceSource::host_events(const engine::Window& w, const engine::EventFn& fn) {
  read_host_events(w, fn, false);
}

void SqlTraceSource::host_context_events(const engine::Window& w, const engine::EventFn& fn) {
  read_host_events(w, fn, true);
}

void SqlTraceSource::read_host_events(const engine::Window& w, const engine::EventFn& fn,
                                      bool for_context) {
  // The op names and the blocks as of one commit (an op first seen in a later one would be
  // skipped); declared before the cursor, which it outlives.
  ReadSnapshot snapshot(reader_.db());
  EventFilter f = filter(w, false);
  f.scan = covers_file(w);
  if (for_context) f.fields.emplace(std::begin(kHostContextFields), std::end(kHostContextFields));
  ahead_samples_.reset();
  auto cursor = EventCursor::open(reader_.db(), EventCursor::Rows::kHostEvents, f, strings_);
  if (!cursor) return fail(cursor.error());
  // On-CPU samples are host events: read directly, they come with their stacks, and the
  // cpu_samples() that follows (engine::read_cpu_samples) need not read the table again.
  std::optional<AheadSamples> ahead;
  if ((*cursor)->direct()) ahead.emplace(AheadSamples{w, {}});
  hal::Event e;
  while (true) {
    auto more = (*cursor)->next(e);
    if (!more) return fail(more.error());
    if (!*more) break;
    if (ahead && e.op == "cpu_sample") {
      if (ahead->samples.size() < kMaxAheadSamples)
        ahead->samples.push_back({int64_t(e.ts_ns), e.pid, e.tid, (*cursor)->row_stack()});
      else
        ahead.reset();  // too many to hold: cpu_samples() reads them
    }
    fn(e);
  }
  ahead_samples_ = std::move(ahead);
}

std::vector<engine::SnapshotRow> SqlTraceSource::snapshots(const engine::Window& w) {
  std::vector<engine::SnapshotRow> out;
  if (!reader_.db().table_exists("system_snapshots")) return out;
  bool node_col = reader_.db().column_exists("system_snapshots", "node");
  auto st =
      prepare(std::string("SELECT timestamp, cpu_pct, mem_pct, mem_avail, swap_mb, load_avg, ") +
              (node_col ? "node" : "''") + " FROM system_snapshots" +
              window_sql(w, "timestamp", false, node_col) + " ORDER BY timestamp");
  if (!st) return out;
  while (row(*st)) {
    engine::SnapshotRow r;
    r.ts_ns = st->int64(0);
    r.cpu_pct = st->real(1);
    r.mem_pct = st->real(2);
    r.mem_avail_mb = st->int64(3);
    r.swap_mb = st->int64(4);
    r.load_avg = st->real(5);
    r.node = st->text(6);
    out.push_back(r);
  }
  return out;
}

std::map<uint32_t, engine::ProcessActivity> SqlTraceSource::process_activity(
    const engine::Window& w) {
  std::map<uint32_t, engine::ProcessActivity> out;
  if (reader_.db().table_exists("process_stats")) {
    auto st = prepare(
        "SELECT pid, max(comm), sum(switches), sum(involuntary), sum(off_cpu_ns), "
        "max(max_off_cpu_ns), "
        "sum(wakeups), sum(page_allocs), sum(page_bytes), sum(forks), sum(block_ios), "
        "sum(block_bytes), "
        "sum(block_ns) FROM process_stats" +
        window_sql(w, "timestamp", false) + " GROUP BY pid");
    if (!st) return out;
    while (row(*st)) {
      engine::ProcessActivity a;
      a.pid = uint32_t(st->int64(0));
      a.comm = st->text(1);
      a.switches = uint64_t(st->int64(2));
      a.involuntary = uint64_t(st->int64(3));
      a.off_cpu_ns = uint64_t(st->int64(4));
      a.max_off_cpu_ns = uint64_t(st->int64(5));
      a.wakeups = uint64_t(st->int64(6));
      a.page_allocs = uint64_t(st->int64(7));
      a.page_bytes = uint64_t(st->int64(8));
      a.forks = uint64_t(st->int64(9));
      a.block_ios = uint64_t(st->int64(10));
      a.block_bytes = uint64_t(st->int64(11));
      a.block_ns = uint64_t(st->int64(12));
      out[a.pid] = a;
    }
  } else if (reader_.is_legacy() && reader_.db().table_exists("event_aggregates")) {
    // The original implementation counted page allocations per pid and minute (source 3,
    // op 3: mm_page_alloc; sum_arg0 = bytes).
    std::string from = std::to_string(w.from_ns - 60'000'000'000LL), to = std::to_string(w.to_ns);
    auto st = prepare(
        "SELECT a.pid, coalesce(max(pn.name), ''), sum(a.count), sum(a.sum_arg0) FROM "
        "event_aggregates a "
        "JOIN ops o ON o.source_id = a.source AND o.op_id = a.op "
        "LEFT JOIN process_names pn ON pn.pid = a.pid "
        "WHERE o.name = 'mm_page_alloc' AND a.bucket BETWEEN " +
        from + " AND " + to + " GROUP BY a.pid");
    if (!st) return out;
    while (row(*st)) {
      engine::ProcessActivity a;
      a.pid = uint32_t(st->int64(0));
      a.comm = st->text(1);
      a.page_allocs = uint64_t(st->int64(2));
      a.page_bytes = uint64_t(st->int64(3));
      out[a.pid] = a;
    }
  }
  return out;
}

std::vector<engine::DeviceCounterSample> SqlTraceSource::device_error_samples(
    const engine::Window& w) {
  std::vector<engine::DeviceCounterSample> out;
  // Files of schema 3-5 read through a TEMP view over their rdma_counters table.
  if (!reader_.db().table_exists("device_counters") &&
      !reader_.db().table_exists("device_counters", "temp"))
    return out;
  // One sample before the window too, so an increase right at its start is seen.
  engine::Window wide = w;
  wide.from_ns = w.from_ns == INT64_MIN ? w.from_ns : w.from_ns - 10'000'000'000LL;
  auto st = prepare("SELECT timestamp, backend, device, port, counter, value FROM device_counters" +
                    window_sql(wide, "timestamp", false) + " AND is_error = 1 ORDER BY timestamp");
  if (!st) return out;
  while (row(*st))
    out.push_back({st->int64(0), st->text(1), st->text(2), uint32_t(st->int64(3)), st->text(4),
                   uint64_t(st->int64(5))});
  return out;
}

std::vector<engine::InflightRow> SqlTraceSource::inflight(const engine::Window& w) {
  InflightFilter f;
  f.from_ns = w.from_ns;
  f.to_ns = w.to_ns;
  f.node = w.node;
  f.pid = w.pid;
  auto rows = read_inflight(reader_.db(), f, strings_);
  if (!rows) {
    fail(rows.error());
    return {};
  }
  return std::move(*rows);
}

std::map<uint64_t, engine::CgroupInfo> SqlTraceSource::cgroups() {
  auto c = read_cgroups(reader_.db());
  if (!c) {
    fail(c.error());
    return {};
  }
  return std::move(*c);
}

// On-CPU samples are host events (`cpu_sample`, v5), with their stack in stack_hash. Their
// (source, op) pairs are looked up once: joining every row of the window with `ops` cost
// more than reading the rows.
std::string SqlTraceSource::cpu_sample_ops() {
  std::string where;
  auto st = prepare("SELECT source_id, op_id FROM ops WHERE name = 'cpu_sample'");
  while (st && row(*st))
    where += std::string(where.empty() ? "" : " OR ") +
             "(source = " + std::to_string(st->int64(0)) +
             " AND op = " + std::to_string(st->int64(1)) + ")";
  return where;
}

bool SqlTraceSource::has_cpu_samples() {
  if (reader_.is_legacy()) return false;
  std::string ops = cpu_sample_ops();
  if (ops.empty()) return false;
  auto st = prepare("SELECT 1 FROM " + host_table(reader_.db()) + " WHERE " + ops + " LIMIT 1");
  return st && row(*st);
}

void SqlTraceSource::cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) {
  if (reader_.is_legacy()) return;
  if (ahead_samples_) {
    AheadSamples a = std::move(*ahead_samples_);
    ahead_samples_.reset();
    // The host events' read covered every process of its window: the same rows, in the same
    // (time, id) order, as the query below would give for a window inside it.
    if (a.window.from_ns <= w.from_ns && a.window.to_ns >= w.to_ns && a.window.node == w.node) {
      for (const engine::CpuSample& s : a.samples)
        if (w.contains(s.ts_ns) && (!w.pid || s.pid == *w.pid)) fn(s);
      return;
    }
  }
  std::string ops = cpu_sample_ops();
  if (ops.empty()) return;
  // Ties in start time come in the order written, as along the time index. Host events are
  // never archived (store/call_archive.h).
  auto st = prepare("SELECT timestamp, pid, tid, stack_hash FROM " + host_table(reader_.db()) +
                    (covers_file(w) ? " NOT INDEXED" : "") +
                    window_sql(w, "timestamp", true,
                               w.node.has_value() && reader_.db().column_exists("events", "node")) +
                    " AND (" + ops + ") ORDER BY timestamp, id");
  if (!st) return;
  while (row(*st))
    fn({st->int64(0), uint32_t(st->int64(1)), uint32_t(st->int64(2)), uint64_t(st->int64(3))});
}

}  // namespace ingero::store
