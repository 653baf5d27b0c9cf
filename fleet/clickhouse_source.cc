#include "fleet/clickhouse_source.h"

#include <algorithm>
#include <cstdio>

#include "fleet/ch_schema.h"
#include "fleet/clickhouse_rows.h"
#include "hal/demangle.h"
#include "store/event_columns.h"
#include "store/inflight_rows.h"
#include "store/schema.h"

namespace ingero::fleet {

ClickHouseTraceSource::ClickHouseTraceSource(std::unique_ptr<ClickHouseClient> client,
                                             int timeout_ms)
    : client_(std::move(client)), timeout_ms_(timeout_ms) {}

void ClickHouseTraceSource::set_clock_offsets(std::map<std::string, int64_t> offsets_ns) {
  offsets_ = std::move(offsets_ns);
  max_offset_ = 0;
  for (const auto& [n, o] : offsets_) max_offset_ = std::max(max_offset_, o < 0 ? -o : o);
}

bool ClickHouseTraceSource::rows(const std::string& sql, size_t columns, const RowFn& fn) {
  std::string failure;
  TsvStream parser(columns, [&](const std::vector<TsvField>& f) {
    try {
      return fn(f);
    } catch (const std::exception& e) {
      failure = std::string("unexpected value in a row (") + e.what() + ")";
      return false;
    }
  });
  auto st = client_->stream(
      sql + "\nFORMAT TabSeparated", {{"readonly", "1"}},
      [&](std::string_view c) { return parser.feed(c); }, timeout_ms_);
  if (st && parser.finish() && failure.empty()) return true;
  if (error_.empty()) {
    error_ = !st ? st.error().message
                 : "ClickHouse at " + client_->endpoint().display() + ": " +
                       (failure.empty() ? parser.error() : failure);
  }
  return false;
}

std::string ClickHouseTraceSource::ts(const std::string& column) const {
  if (offsets_.empty()) return "toInt64(" + column + ")";
  std::string nodes, values;
  for (const auto& [n, o] : offsets_) {
    nodes += (nodes.empty() ? "" : ", ") + sql_quote(n);
    values += (values.empty() ? "" : ", ") + std::string("toInt64(") + std::to_string(o) + ")";
  }
  return "(toInt64(" + column + ") - transform(node, [" + nodes + "], [" + values +
         "], toInt64(0)))";
}

std::string ClickHouseTraceSource::where(const engine::Window& w, const std::string& ts_column,
                                         bool with_pid) const {
  std::string s = " WHERE 1";
  const std::string t = ts(ts_column);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min(),
                    kMax = std::numeric_limits<int64_t>::max();
  if (w.from_ns != kMin) {
    s += " AND " + t + " >= " + std::to_string(w.from_ns);
    int64_t raw = w.from_ns - max_offset_;
    if (raw > 0) s += " AND " + ts_column + " >= " + std::to_string(raw);
  }
  if (w.to_ns != kMax) {
    s += " AND " + t + " <= " + std::to_string(w.to_ns);
    if (w.to_ns < kMax - max_offset_ && w.to_ns + max_offset_ >= 0)
      s += " AND " + ts_column + " <= " + std::to_string(w.to_ns + max_offset_);
  }
  if (auto node = w.node ? w.node : scope_) s += " AND node = " + sql_quote(*node);
  if (with_pid && w.pid) s += " AND pid = " + std::to_string(*w.pid);
  return s;
}

// Rows of the contract views (view_select: as this build defines them), decoded by the store's
// mapping; the time is the corrected one.
void ClickHouseTraceSource::events(const engine::Window& w, bool host, const engine::EventFn& fn) {
  const View view = host ? View::kHostEvents : View::kCalls;
  const auto have = view_column_names(view);
  std::vector<std::string> cols;
  for (const std::string& c :
       store::EventColumns::names(host ? store::EventRows::kHostEvents : store::EventRows::kCalls))
    if (c != "ts_ns" && std::find(have.begin(), have.end(), c) != have.end()) cols.push_back(c);
  std::string list;
  for (const auto& c : cols) list += ", " + c;
  // A call seen at entry only takes the mean of the timed calls of its process and op
  // (fleet/untimed_means.h); the row's node, last, tells whose.
  const UntimedMeans* means = host ? nullptr : untimed_means(w);
  if (means) list += ", node";
  std::string cond = where(w, "ts_ns", !host).substr(std::string(" WHERE ").size());
  std::string sql = "SELECT " + ts("ts_ns") + " AS t" + list + " FROM (" +
                    view_select(client_->endpoint().database, view, cond) +
                    ") ORDER BY t, node, session_start, id";
  const store::EventColumns mapping(
      host ? store::EventRows::kHostEvents : store::EventRows::kCalls, [&](std::string_view name) {
        if (name == "ts_ns") return 0;
        auto it = std::find(cols.begin(), cols.end(), name);
        return it == cols.end() ? store::EventColumns::kNone : int(it - cols.begin()) + 1;
      });
  hal::Event e;
  rows(sql, cols.size() + (means ? 2 : 1), [&](const std::vector<TsvField>& f) {
    mapping.read(TsvRow{f}, e, strings_);
    if (means && !e.timed) e.dur_ns = means->of(f.back().text, e.pid, e.vendor, e.api, e.op);
    fn(e);
    return true;
  });
}

bool ClickHouseTraceSource::has_cpu_samples() {
  auto known = has_cpu_samples_.find(scope_);
  if (known == has_cpu_samples_.end()) {
    bool any = false;
    rows("SELECT count() > 0 FROM (SELECT 1 FROM " + table("events") + where({}, "ts_ns", false) +
             " AND vendor = 'host' AND op = 'cpu_sample' LIMIT 1)",
         1, [&](const std::vector<TsvField>& f) {
           any = i64(f[0]) != 0;
           return true;
         });
    known = has_cpu_samples_.emplace(scope_, any).first;
  }
  return known->second;
}

void ClickHouseTraceSource::cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) {
  if (!has_cpu_samples()) return;
  rows("SELECT " + ts("ts_ns") + " AS t, pid, tid, stack_hash FROM " + table("events") +
           where(w, "ts_ns", true) +
           " AND vendor = 'host' AND op = 'cpu_sample' ORDER BY t, node, session_start, src_id",
       4, [&](const std::vector<TsvField>& f) {
         fn({i64(f[0]), uint32_t(u64(f[1])), uint32_t(u64(f[2])), u64(f[3])});
         return true;
       });
}

const UntimedMeans* ClickHouseTraceSource::untimed_means(const engine::Window& w) {
  const std::string filter = where(w, "ts_ns", false);
  auto it = untimed_.find(filter);
  if (it != untimed_.end()) return &it->second;
  UntimedMeans m;
  if (!rows(UntimedMeans::sql(table("events"), filter), UntimedMeans::kColumns,
            [&](const std::vector<TsvField>& f) {
              m.add(f);
              return true;
            }))
    return nullptr;
  return &untimed_.emplace(filter, std::move(m)).first->second;
}

void ClickHouseTraceSource::calls(const engine::Window& w, const engine::EventFn& fn) {
  events(w, false, fn);
}

void ClickHouseTraceSource::host_events(const engine::Window& w, const engine::EventFn& fn) {
  events(w, true, fn);
}

std::vector<engine::SnapshotRow> ClickHouseTraceSource::snapshots(const engine::Window& w) {
  std::vector<engine::SnapshotRow> out;
  rows("SELECT " + ts("timestamp") +
           " AS t, cpu_pct, mem_pct, mem_avail, swap_mb, load_avg, node FROM " +
           table("system_snapshots") + where(w, "timestamp", false) + " ORDER BY t, node",
       7, [&](const auto& f) {
         engine::SnapshotRow r;
         r.ts_ns = i64(f[0]);
         r.cpu_pct = f64(f[1]);
         r.mem_pct = f64(f[2]);
         r.mem_avail_mb = i64(f[3]);
         r.swap_mb = i64(f[4]);
         r.load_avg = f64(f[5]);
         r.node = f[6].text;
         out.push_back(r);
         return true;
       });
  return out;
}

std::map<uint32_t, engine::ProcessActivity> ClickHouseTraceSource::process_activity(
    const engine::Window& w) {
  std::map<uint32_t, engine::ProcessActivity> out;
  rows(
      "SELECT pid, any(comm), sum(switches), sum(involuntary), sum(off_cpu_ns), "
      "max(max_off_cpu_ns), sum(wakeups), sum(page_allocs), sum(page_bytes), sum(forks), "
      "sum(block_ios), sum(block_bytes), sum(block_ns) FROM " +
          table("process_stats") + where(w, "timestamp", false) + " GROUP BY pid",
      13, [&](const auto& f) {
        engine::ProcessActivity a;
        a.pid = uint32_t(u64(f[0]));
        a.comm = f[1].text;
        uint64_t* dst[] = {&a.switches,  &a.involuntary, &a.off_cpu_ns, &a.max_off_cpu_ns,
                           &a.wakeups,   &a.page_allocs, &a.page_bytes, &a.forks,
                           &a.block_ios, &a.block_bytes, &a.block_ns};
        for (size_t i = 0; i < std::size(dst); ++i) *dst[i] = u64(f[2 + i]);
        out[a.pid] = a;
        return true;
      });
  return out;
}

std::map<uint32_t, engine::ProcessInfo> ClickHouseTraceSource::processes() {
  std::map<uint32_t, engine::ProcessInfo> out;
  std::string filter = scope_ ? " WHERE node = " + sql_quote(*scope_) : "";
  rows("SELECT pid, argMax(name, seen_at), argMax(cmdline, seen_at) FROM " +
           table("process_names") + filter + " GROUP BY pid",
       3, [&](const auto& f) {
         engine::ProcessInfo p;
         p.pid = uint32_t(u64(f[0]));
         p.name = f[1].text;
         p.cmdline = f[2].text;
         out[p.pid] = p;
         return true;
       });
  return out;
}

std::vector<std::string> ClickHouseTraceSource::nodes() {
  // Asked first of every command and of `mcp` at its start: a server that takes the connection
  // and never answers (hung, or not ClickHouse) held them for each SELECT's limit, 10 minutes,
  // without a word. It must answer within kPingMs: its first question, or a bare SELECT.
  if (auto st = client_->ping(kPingMs); !st) {
    if (error_.empty()) error_ = st.error().message;
    return {};
  }
  // A node that shipped its sessions and no event (a silent node, the one an operator looks
  // for) is a node: it was said not to exist, and the fleet header did not count it.
  std::vector<std::string> out;
  rows("SELECT DISTINCT node FROM (SELECT DISTINCT node FROM " + table("events") +
           " UNION ALL SELECT DISTINCT node FROM " + table("sessions") + ") ORDER BY node",
       1, [&](const auto& f) {
         out.push_back(f[0].text);
         return true;
       });
  return out;
}

std::map<std::string, std::vector<std::string>> ClickHouseTraceSource::shared_nodes() {
  // Every (node, host), the one-host nodes dropped here: an IN subquery over a Distributed
  // table is refused by ClickHouse (distributed_product_mode = deny), and failed explain.
  std::map<std::string, std::vector<std::string>> out;
  rows("SELECT node, host FROM " + table("sessions") + " GROUP BY node, host ORDER BY node, host",
       2, [&](const auto& f) {
         out[f[0].text].push_back(f[1].text);
         return true;
       });
  std::erase_if(out, [](const auto& n) { return n.second.size() < 2; });
  return out;
}

std::pair<int64_t, int64_t> ClickHouseTraceSource::time_span() { return span_of({}); }

std::pair<int64_t, int64_t> ClickHouseTraceSource::node_span(const std::string& node) {
  engine::Window w;
  w.node = node;
  return span_of(w);
}

// The events' extent, and the stuck threads the agents last saw: a hang goes on after the last
// call that returned (its ranks make none), and the window the engine reads (explain pins its
// end here) must hold the rows that show it.
std::pair<int64_t, int64_t> ClickHouseTraceSource::span_of(const engine::Window& w) {
  std::pair<int64_t, int64_t> span{0, 0};
  auto widen = [&](const auto& f) {
    if (!u64(f[0])) return true;
    span = span.first ? std::pair{std::min(span.first, i64(f[1])), std::max(span.second, i64(f[2]))}
                      : std::pair{i64(f[1]), i64(f[2])};
    return true;
  };
  rows("SELECT count(), min(" + ts("ts_ns") + "), max(" + ts("ts_ns") +
           " + toInt64(dur_ns)) FROM " + table("events") + where(w, "ts_ns", false),
       3, widen);
  if (has_table("inflight")) {
    std::string filter = " WHERE 1";
    if (auto node = w.node ? w.node : scope_) filter += " AND node = " + sql_quote(*node);
    rows("SELECT count(), min(" + ts("entered_at") + "), max(" + ts("seen_at") + ") FROM " +
             table("inflight") + filter,
         3, widen);
  }
  return span;
}

uint64_t ClickHouseTraceSource::event_count(const engine::Window& w) {
  uint64_t n = 0;
  rows("SELECT count() FROM " + table("events") + where(w, "ts_ns", false), 1, [&](const auto& f) {
    n = u64(f[0]);
    return true;
  });
  return n;
}

std::map<uint64_t, engine::CgroupInfo> ClickHouseTraceSource::cgroups() {
  std::map<uint64_t, engine::CgroupInfo> out;
  // A table created before the name columns lacks them until a shipper adds them.
  bool names = false;
  rows("SELECT count() FROM system.columns WHERE database = " +
           sql_quote(client_->endpoint().database) +
           " AND table = 'cgroup_metadata' AND name = 'container_name'",
       1, [&](const auto& f) {
         names = u64(f[0]) > 0;
         return true;
       });
  // Shipped again when a name changed: a row that has each name, if one does.
  auto known = [](const std::string& c) { return ", anyIf(" + c + ", " + c + " != '')"; };
  std::string cols = known("container_id") + known("pod_name") + known("namespace");
  for (const char* c : {"container_name", "pod_uid", "qos_class", "runtime"})
    cols += names ? known(std::string("ifNull(") + c + ", '')") : std::string(", ''");
  std::string filter = scope_ ? " WHERE node = " + sql_quote(*scope_) : "";
  rows("SELECT cgroup_id, any(cgroup_path)" + cols + " FROM " + table("cgroup_metadata") + filter +
           " GROUP BY cgroup_id",
       9, [&](const auto& f) {
         engine::CgroupInfo& c = out[u64(f[0])];
         c.path = f[1].text;
         c.container_id = f[2].text;
         c.pod = f[3].text;
         c.pod_namespace = f[4].text;
         c.container = f[5].text;
         c.pod_uid = f[6].text;
         c.qos = f[7].text;
         c.runtime = f[8].text;
         return true;
       });
  return out;
}

std::optional<engine::TraceLosses> ClickHouseTraceSource::losses() {
  // A session's row is shipped at start and at stop: the latest version of each counts.
  std::string filter = scope_ ? " WHERE node = " + sql_quote(*scope_) : "";
  const char* cols[] = {"ringbuf_drops", "call_drops", "stack_drops",        "host_drops",
                        "sample_drops",  "lost_calls", "calls_lost_at_exit", "store_errors"};
  std::string inner, outer;
  for (const char* c : cols) {
    inner += std::string(inner.empty() ? "" : ", ") + "argMax(" + c + ", stopped_at) AS " + c;
    outer += std::string(outer.empty() ? "" : ", ") + "sum(" + c + ")";
  }
  std::optional<engine::TraceLosses> out;
  rows("SELECT " + outer + ", min(call_drops) FROM (SELECT " + inner + " FROM " +
           table("sessions") + filter + " GROUP BY node, started_at)",
       9, [&](const auto& f) {
         engine::TraceLosses l;
         uint64_t* dst[] = {&l.ringbuf_drops,      &l.call_drops,   &l.stack_drops,
                            &l.host_drops,         &l.sample_drops, &l.lost_calls,
                            &l.calls_lost_at_exit, &l.store_errors};
         l.by_kind = i64(f[8]) >= 0;  // -1: a session from a file without per-kind counters
         for (int i = 0; i < 8; ++i) *dst[i] = uint64_t(std::max<int64_t>(0, i64(f[i])));
         if (!l.by_kind) l.call_drops = l.stack_drops = l.host_drops = l.sample_drops = 0;
         out = l;
         return true;
       });
  return out;
}

bool ClickHouseTraceSource::has_stacks() {
  if (!has_stacks_) {
    bool any = false;
    rows("SELECT count() FROM (SELECT 1 FROM " + table("stack_frames") + " LIMIT 1)", 1,
         [&](const auto& f) {
           any = u64(f[0]) > 0;
           return true;
         });
    has_stacks_ = any;
  }
  return *has_stacks_;
}

std::vector<engine::StackFrameInfo> ClickHouseTraceSource::stack(uint64_t stack_id) {
  if (auto it = stack_cache_.find(stack_id); it != stack_cache_.end()) return it->second;
  std::vector<engine::StackFrameInfo> out;
  // The same stack may have been shipped by several nodes: one copy of each frame.
  rows("SELECT frame, kind, function, file, line, module, module_offset FROM " +
           table("stack_frames") + " WHERE stack_id = " + std::to_string(int64_t(stack_id)) +
           " ORDER BY frame LIMIT 1 BY frame",
       7, [&](const auto& f) {
         engine::StackFrameInfo s;
         s.python = f[1].text == "python";
         s.function = s.python ? f[2].text : hal::demangle(f[2].text);
         s.file = f[3].text;
         s.line = i64(f[4]);
         s.module = f[5].text;
         if (!f[6].null) {
           char buf[64];
           std::snprintf(buf, sizeof(buf), "+0x%llx", (unsigned long long)u64(f[6]));
           s.address = s.module + buf;
         }
         out.push_back(std::move(s));
         return true;
       });
  if (stack_cache_.size() < 100000) stack_cache_[stack_id] = out;
  return out;
}

// The latest version of each stuck thread's row (the shipper sends every version the tracer
// wrote, store/table_defs.h), decoded by the store's mapping; times on the corrected clock. One
// aggregation (argMax by src_id per thread and entry), not an IN over a subquery: over
// Distributed tables that would be a double-distributed subquery, which ClickHouse refuses.
std::vector<engine::InflightRow> ClickHouseTraceSource::inflight(const engine::Window& w) {
  std::vector<engine::InflightRow> out;
  if (!has_table("inflight")) return out;
  static const std::set<std::string> kTimes = {"entered_at", "seen_at", "ended_at", "reported_at",
                                               "thread_state_since"};
  const auto& columns = store::inflight_columns();
  std::string latest, outer;
  size_t seen = 0, entered = 0;
  for (size_t k = 0; k < columns.size(); ++k) {
    const std::string& c = columns[k];
    std::string v = "v" + std::to_string(k);
    std::string expr = kTimes.count(c) ? "if(" + c + " = 0, toInt64(0), " + ts(c) + ")" : c;
    latest += (k ? ", " : "") + ("argMax(" + expr + ", src_id) AS " + v);
    outer += (k ? ", " : "") + v;
    if (c == "seen_at") seen = k;
    if (c == "entered_at") entered = k;
  }
  std::string where = " WHERE 1";
  if (w.to_ns != std::numeric_limits<int64_t>::max())
    where += " AND " + ts("entered_at") + " <= " + std::to_string(w.to_ns);
  if (auto node = w.node ? w.node : scope_) where += " AND node = " + sql_quote(*node);
  if (w.pid) where += " AND pid = " + std::to_string(*w.pid);
  // Stuck from entered_at to seen_at, as over a trace file (store/inflight_rows.h).
  std::string sql = "SELECT " + outer + " FROM (SELECT " + latest + " FROM " + table("inflight") +
                    where + " GROUP BY node, session_start, tid, entered_at, what)";
  if (w.from_ns != std::numeric_limits<int64_t>::min())
    sql += " WHERE v" + std::to_string(seen) + " >= " + std::to_string(w.from_ns);
  sql += " ORDER BY v" + std::to_string(entered) + ", v0";
  rows(sql, columns.size(), [&](const std::vector<TsvField>& f) {
    out.push_back(store::inflight_row(TsvRow{f}, strings_));
    return true;
  });
  return out;
}

}  // namespace ingero::fleet
