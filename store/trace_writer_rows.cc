// The rows TraceWriter writes beside the events: the samplers' host snapshots, per-process
// aggregates and device counters, cgroup paths, call stacks, and the engine's causal chains.
#include <nlohmann/json.hpp>

#include "engine/json_text.h"
#include "store/contract_views.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::add_snapshot(const SnapshotRow& r) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT INTO system_snapshots (node, timestamp, cpu_pct, mem_pct, mem_avail, swap_mb, "
      "load_avg, procs_running) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  st.bind(1, node_)
      .bind(2, r.ts_ns)
      .bind(3, r.cpu_pct)
      .bind(4, r.mem_pct)
      .bind(5, r.mem_avail_mb)
      .bind(6, r.swap_mb)
      .bind(7, r.load_avg)
      .bind(8, r.procs_running);
  if (auto x = st.step(); !x) return x.error();
  return {};
}

ingero::Status TraceWriter::add_merged_sessions(const std::vector<SessionIdentity>& sources) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st = db_->prepare(
      "INSERT OR IGNORE INTO merged_sessions (session_id, node, host, started_at) "
      "VALUES (?, ?, ?, ?)");
  if (!st) return st.error();
  for (const auto& s : sources) {
    st->bind(1, session_id_).bind(2, s.node).bind(3, s.host).bind(4, s.started_at_ns);
    if (auto x = st->step(); !x) return x.error();
    st->reset();
  }
  return {};
}

ingero::Status TraceWriter::add_device_counter(const DeviceCounterRow& r) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT INTO device_counters (node, session_id, timestamp, backend, device, port, counter, "
      "value, base_value, unit, is_error, attributes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  nlohmann::json attrs = nlohmann::json::object();
  for (const auto& a : r.attributes) attrs[a.key] = a.value;
  st.bind(1, node_)
      .bind(2, session_id_)
      .bind(3, r.ts_ns)
      .bind(4, r.backend)
      .bind(5, r.device)
      .bind(6, int64_t(r.port))
      .bind(7, r.counter)
      .bind(8, int64_t(r.value))
      .bind(9, int64_t(r.base_value))
      .bind(10, r.unit)
      .bind(11, int64_t(r.is_error))
      .bind(12, engine::json_text(attrs));
  if (auto x = st.step(); !x) return x.error();
  return {};
}

ingero::Status TraceWriter::add_cgroup_path(uint64_t cgroup_id, std::string_view path) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT INTO cgroup_metadata (cgroup_id, cgroup_path) VALUES (?, ?) ON CONFLICT(cgroup_id) "
      "DO UPDATE SET cgroup_path = excluded.cgroup_path");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  st.bind(1, int64_t(cgroup_id)).bind(2, path);
  if (auto x = st.step(); !x) return x.error();
  return {};
}

ingero::Status TraceWriter::add_process_stats(const ProcessStatsRow& r) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT INTO process_stats (node, session_id, timestamp, duration, pid, comm, cgroup_id, "
      "switches, involuntary, off_cpu_ns, max_off_cpu_ns, wakeups, page_allocs, page_bytes, forks, "
      "block_ios, block_bytes, block_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  st.bind(1, node_)
      .bind(2, session_id_)
      .bind(3, r.ts_ns)
      .bind(4, r.dur_ns)
      .bind(5, int64_t(r.pid))
      .bind(6, r.comm)
      .bind(7, int64_t(r.cgroup_id))
      .bind(8, int64_t(r.switches))
      .bind(9, int64_t(r.involuntary))
      .bind(10, int64_t(r.off_cpu_ns))
      .bind(11, int64_t(r.max_off_cpu_ns))
      .bind(12, int64_t(r.wakeups))
      .bind(13, int64_t(r.page_allocs))
      .bind(14, int64_t(r.page_bytes))
      .bind(15, int64_t(r.forks))
      .bind(16, int64_t(r.block_ios))
      .bind(17, int64_t(r.block_bytes))
      .bind(18, int64_t(r.block_ns));
  if (auto x = st.step(); !x) return x.error();
  return {};
}

ingero::Result<std::string> stored_chain_id(Db& db, const std::string& id, int64_t session) {
  auto owner = db.cached("SELECT session_id FROM causal_chains WHERE id = ?");
  if (!owner) return owner.error();
  (*owner)->reset();
  (*owner)->bind(1, id);
  auto held = (*owner)->step();
  if (!held) return held.error();
  bool other = *held && (*owner)->int64(0) != session;
  (*owner)->reset();
  return other ? id + "@" + std::to_string(session) : id;
}

ingero::Status TraceWriter::replace_chains(const std::vector<ChainRow>& chains) {
  if (auto st = begin_if_needed(); !st) return st;
  auto del = db_->prepare("DELETE FROM causal_chains WHERE session_id = ?");
  if (!del) return del.error();
  del->bind(1, session_id_);
  if (auto x = del->step(); !x) return x.error();
  auto st = db_->prepare(
      "INSERT OR REPLACE INTO causal_chains (id, detected_at, severity, summary, root_cause, "
      "explanation, recommendations, cuda_op, cuda_p99_us, cuda_p50_us, tail_ratio, timeline, "
      "node, "
      "session_id, rule, vendor, api, pids, window_start, window_end) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  for (const auto& c : chains) {
    auto id = stored_chain_id(*db_, c.id, session_id_);
    if (!id) return id.error();
    st->reset();
    st->bind(1, *id)
        .bind(2, c.detected_at_ns)
        .bind(3, c.severity)
        .bind(4, c.summary)
        .bind(5, c.root_cause)
        .bind(6, c.explanation)
        .bind(7, c.recommendations_json)
        .bind(8, c.op)
        .bind(9, c.p99_us)
        .bind(10, c.p50_us)
        .bind(11, c.tail_ratio)
        .bind(12, c.timeline_json)
        .bind(13, node_)
        .bind(14, session_id_)
        .bind(15, c.rule)
        .bind(16, c.vendor)
        .bind(17, c.api)
        .bind(18, c.pids_json)
        .bind(19, c.window_start_ns)
        .bind(20, c.window_end_ns);
    if (auto x = st->step(); !x) return x.error();
  }
  return {};
}

ingero::Status TraceWriter::add_legacy_stack(int64_t hash, std::string_view ips,
                                             std::string_view frames) {
  if (auto st = begin_if_needed(); !st) return st;
  if (!db_->table_exists("stack_traces")) {
    // The file's own stacks view reads it from now on (the views are the file's, schema 10).
    if (auto st = db_->exec(
            "CREATE TABLE stack_traces (hash INTEGER PRIMARY KEY, ips TEXT NOT NULL, frames TEXT "
            "NOT NULL DEFAULT '');\nDROP VIEW IF EXISTS main.stacks;\n" +
            stacks_view_sql("CREATE VIEW", true, true));
        !st)
      return st;
  }
  auto st_cached =
      db_->cached("INSERT OR IGNORE INTO stack_traces (hash, ips, frames) VALUES (?, ?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  st.bind(1, hash).bind(2, ips).bind(3, frames);
  if (auto x = st.step(); !x) return x.error();
  return {};
}

ingero::Status TraceWriter::add_stack(uint64_t stack_id,
                                      const std::vector<hal::StackFrame>& frames) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT OR IGNORE INTO stack_frames (stack_id, frame, kind, module, module_offset, build_id, "
      "function, "
      "file, line) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    sqlite3_reset(st.get());
    st.bind(1, int64_t(stack_id))
        .bind(2, int64_t(i))
        .bind(3, std::string_view(f.python ? "python" : "native"));
    st.bind(4, f.module);
    if (f.module_offset)
      st.bind(5, int64_t(*f.module_offset));
    else
      st.bind_null(5);
    st.bind(6, f.build_id).bind(7, f.function).bind(8, f.file);
    if (f.line > 0)
      st.bind(9, f.line);
    else
      st.bind_null(9);
    if (auto x = st.step(); !x) return x.error();
  }
  return {};
}

}  // namespace ingero::store
