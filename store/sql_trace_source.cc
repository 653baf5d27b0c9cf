#include "store/sql_trace_source.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <set>

#include "hal/demangle.h"
#include "hal/memory.h"
#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/folded_calls.h"
#include "store/host_store.h"
#include "store/kernel_names.h"
#include "store/legacy_views.h"
#include "store/op_dictionary.h"
#include "store/read_snapshot.h"
#include "store/stacks.h"
#include "store/trace_queries.h"

namespace ingero::store {

std::string SqlTraceSource::window_sql(const engine::Window& w, const char* ts, bool with_pid,
                                       bool with_node) {
  std::string s = std::string(" WHERE ") + ts + " BETWEEN " + std::to_string(w.from_ns) + " AND " +
                  std::to_string(w.to_ns);
  if (with_pid && w.pid) s += " AND pid = " + std::to_string(*w.pid);
  if (with_node && w.node) s += " AND node = " + sql_quote(*w.node);
  return s;
}

SqlTraceSource::SqlTraceSource(std::unique_ptr<TraceReader> own, SqlTraceSource* parent)
    : own_reader_(std::move(own)), parent_(parent), reader_(*own_reader_) {
  set_call_cache(0);  // it reads host context, never the calls twice
  if (parent->extent_) plan_span_ = parent->extent_->span;
}

SqlTraceSource::~SqlTraceSource() {
  if (parent_ && !error_.empty()) parent_->fail(ingero::make_error(error_));
}

std::unique_ptr<engine::TraceSource> SqlTraceSource::open_another() {
  // Inside a read transaction (a report's, an MCP tool's, explain's), the second connection
  // reads the same state of the file (its folding state checked), or none is opened and the
  // caller reads on this one: a connection of its own would see commits made since, and a
  // figure of one read would not add up with another's.
  if (in_transaction(reader_.db())) {
    auto state = folding_state();
    return state ? open_matching(*state) : nullptr;
  }
  auto r = reader_.reopen();
  if (!r) return nullptr;  // the caller reads on this connection instead
  return std::unique_ptr<SqlTraceSource>(new SqlTraceSource(std::move(*r), this));
}

void SqlTraceSource::fail(const ingero::Error& e) {
  if (error_.empty()) error_ = e.message;
}

std::optional<Stmt> SqlTraceSource::prepare(const std::string& sql) {
  auto st = reader_.db().prepare(sql);
  if (!st) {
    fail(st.error());
    return std::nullopt;
  }
  return std::move(*st);
}

bool SqlTraceSource::row(Stmt& st) {
  auto r = st.step();
  if (!r) {
    fail(r.error());
    return false;
  }
  return *r;
}

EventFilter SqlTraceSource::filter(const engine::Window& w, bool with_pid) const {
  EventFilter f;
  f.from_ns = w.from_ns;
  f.to_ns = w.to_ns;
  if (with_pid) f.pid = w.pid;
  f.node = w.node;
  return f;
}

std::map<uint32_t, engine::ProcessInfo> SqlTraceSource::processes_of(
    const std::optional<std::string>& node) {
  std::map<uint32_t, engine::ProcessInfo> out;
  bool has_cmd = reader_.db().column_exists("process_names", "cmdline");
  bool by_node = node && reader_.db().column_exists("process_names", "node");
  auto st = prepare(std::string("SELECT pid, name, ") + (has_cmd ? "cmdline" : "''") +
                    " FROM process_names" + (by_node ? " WHERE node = ?" : ""));
  if (!st) return out;
  if (by_node) st->bind(1, std::string_view(*node));
  while (row(*st)) {
    engine::ProcessInfo p;
    p.pid = uint32_t(st->int64(0));
    p.name = st->text(1);
    p.cmdline = st->text(2);
    out[p.pid] = p;
  }
  return out;
}

uint64_t SqlTraceSource::event_count(const engine::Window& w) {
  // The block entries, and the rows of the blocks across an edge, as of one commit: a block
  // still filling, counted by its entry inside the window, was counted again by its rows once a
  // commit between the two reads took it past the window's end.
  ReadSnapshot snapshot(reader_.db());
  bool store = has_call_store(reader_.db());
  bool by_node = reader_.db().column_exists("events", "node");
  // Host events: the blocks' counts, but for those across an edge of the window (their rows'
  // timestamps: reading every block inside it too was a quarter of the tracer's session end,
  // whose window begins after the first block I/O it records).
  uint64_t n = 0;
  if (has_host_store(reader_.db())) {
    auto host = count_host_events(reader_.db(), w.from_ns, w.to_ns, w.node);
    if (!host) {
      fail(host.error());
      return 0;
    }
    n = *host;
  } else {
    // A legacy file's events without a time are none of the trace's (store/legacy_views.h).
    auto st =
        prepare(std::string("SELECT count(*) FROM ") + (store ? "main.host_rows" : "main.events") +
                window_sql(w, "timestamp", false, by_node) +
                (reader_.is_legacy() ? " AND " + legacy_has_time_sql("") : std::string()));
    if (!st || !row(*st)) return 0;
    n = uint64_t(st->int64(0));
    // The original implementation's driver calls made inside a runtime call are counted in it,
    // as `calls` reads them (store/legacy_views.h).
    n -= uint64_t(reader_.legacy_nested_calls(by_node ? w.node : std::nullopt, w.from_ns, w.to_ns));
  }
  if (store) {
    if (covers_file(w)) {  // every block: their entries' counts
      if (auto counts = check_block_counts(reader_.db()); !counts) {
        fail(counts.error());
        return 0;
      }
      if (auto c = prepare("SELECT coalesce(sum(calls), 0) FROM main.call_store" +
                           (w.node ? " WHERE node = " + sql_quote(*w.node) : std::string()));
          c && row(*c))
        n += uint64_t(c->int64(0));
      return n;
    }
    auto kept = count_kept_calls(reader_.db(), w.from_ns, w.to_ns, w.node);
    if (!kept) fail(kept.error());
    n += kept ? *kept : 0;
  } else {
    auto archived =
        count_archived(reader_.db(), w.from_ns, w.to_ns, by_node ? w.node : std::nullopt);
    if (!archived) fail(archived.error());
    n += archived ? *archived : 0;
  }
  // Calls folded into runs (tiered retention) are events of the trace all the same.
  if (!reader_.db().table_exists("call_runs")) return n;
  if (covers_file(w) && !store) {
    if (auto runs = prepare("SELECT coalesce(sum(calls), 0) FROM main.call_runs NOT INDEXED" +
                            window_sql(w, "timestamp", false));
        runs && row(*runs))
      n += uint64_t(runs->int64(0));
    // Archived runs: their blocks' sums (the window covers every block).
    if (has_run_archive(reader_.db()))
      if (auto runs = prepare("SELECT coalesce(sum(calls), 0) FROM main.run_blocks" +
                              (w.node ? " WHERE node = " + sql_quote(*w.node) : std::string()));
          runs && row(*runs))
        n += uint64_t(runs->int64(0));
    return n;
  }
  // A run across an edge of the window counts the calls the reads give inside it: those whose
  // start, spread over the run as the reads spread them, lies in the window. The runs are those
  // the reads take (every process's).
  auto runs = RunCursor::open(reader_.db(), filter(w, false), strings_);
  if (!runs) {
    fail(runs.error());
    return n;
  }
  engine::CallRun r;
  while (true) {
    auto more = (*runs)->next(r);
    if (!more) {
      fail(more.error());
      break;
    }
    if (!*more) break;
    if (r.inside(w.from_ns, w.to_ns)) {
      n += r.calls;
      continue;
    }
    r.for_each_span([&](uint64_t, int64_t start, uint64_t) { n += w.contains(start) ? 1 : 0; });
  }
  return n;
}

bool SqlTraceSource::has_stacks() { return store::has_stacks(reader_.db()); }

std::vector<engine::StackFrameInfo> SqlTraceSource::stack(uint64_t stack_id) {
  std::vector<engine::StackFrameInfo> out;
  auto frames = read_stack(reader_.db(), int64_t(stack_id));
  if (!frames) {
    fail(frames.error());
    return out;
  }
  if (!*frames) return out;
  for (const auto& f : **frames)
    out.push_back({f.python, f.python ? f.function : hal::demangle(f.function), f.file, f.line,
                   f.module, f.address});
  return out;
}

std::vector<engine::KernelNameInfo> SqlTraceSource::kernel_names(
    const std::optional<std::string>& node) {
  if (reader_.is_legacy()) return {};
  auto names = read_kernel_names(reader_.db(), node);
  if (!names) {
    fail(names.error());
    return {};
  }
  return std::move(*names);
}

std::optional<engine::KernelNaming> SqlTraceSource::kernel_naming(
    const std::optional<std::string>& node) {
  if (reader_.is_legacy()) return std::nullopt;
  auto n = read_kernel_naming(reader_.db(), node);
  if (!n) {
    fail(n.error());
    return std::nullopt;
  }
  return *n;
}

std::set<uint32_t> SqlTraceSource::tracer_pids(const std::optional<std::string>& node) {
  std::set<uint32_t> out;
  Db& db = reader_.db();
  if (reader_.is_legacy() || !db.column_exists("sessions", "tracer_pid")) return out;
  auto st = prepare("SELECT DISTINCT tracer_pid FROM sessions WHERE tracer_pid <> 0" +
                    (node ? " AND node = " + sql_quote(*node) : std::string()));
  if (!st) return out;
  while (row(*st)) out.insert(uint32_t(st->int64(0)));
  return out;
}

std::optional<engine::TraceLosses> SqlTraceSource::losses() { return losses_of(std::nullopt); }

std::optional<engine::TraceLosses> SqlTraceSource::node_losses(const std::string& node) {
  return losses_of(node);
}

std::optional<engine::TraceLosses> SqlTraceSource::losses_of(
    const std::optional<std::string>& node) {
  if (reader_.is_legacy()) return std::nullopt;
  auto sums = read_loss_sums(reader_.db(), node);
  if (!sums) {
    fail(sums.error());
    return std::nullopt;
  }
  engine::TraceLosses l = *sums;  // the sums without unfinished_calls
  auto late = read_late_libraries(reader_.db(), node);
  if (!late) {
    fail(late.error());
    return std::nullopt;
  }
  // One library is attached by each backend that probes it (libnccl: NCCL's API and its static
  // copy of the CUDA runtime): its lateness is said once per process, the latest.
  for (const LibraryRow& r : *late) {
    auto same = std::find_if(l.late_libraries.begin(), l.late_libraries.end(), [&](const auto& x) {
      return x.path == r.path && x.pid == r.late_pid;
    });
    if (same == l.late_libraries.end())
      l.late_libraries.push_back({r.path, r.late_pid, r.late_ns});
    else
      same->late_ns = std::max(same->late_ns, r.late_ns);
  }
  // What retention deleted (store/retention.h); older files recorded only where it cut.
  Db& db = reader_.db();
  if (db.table_exists("retention_state")) {
    bool counts = db.column_exists("retention_state", "calls");
    if (auto st = prepare(counts ? "SELECT deleted_before, calls, events, first_ts FROM "
                                   "retention_state"
                                 : "SELECT deleted_before, 0, 0, 0 FROM retention_state");
        st && row(*st)) {
      l.retention_before_ns = st->int64(0);
      l.retention_calls = uint64_t(st->int64(1));
      l.retention_events = uint64_t(st->int64(2));
      l.retention_from_ns = st->int64(3);
    }
  }
  return l;
}

int64_t SqlTraceSource::recent_start(const engine::Window& w, uint64_t max_calls) {
  if (!reader_.db().table_exists("call_seconds")) return w.from_ns;
  auto st =
      prepare("SELECT timestamp, sum(calls) FROM call_seconds" + window_sql(w, "timestamp", true) +
              " GROUP BY timestamp ORDER BY timestamp DESC");
  if (!st) return w.from_ns;
  uint64_t n = 0;
  std::optional<int64_t> later;  // the start of the second after this one
  while (row(*st)) {
    int64_t second = st->int64(0);
    n += uint64_t(st->int64(1));
    if (n > max_calls) return std::max(w.from_ns, later.value_or(second));
    later = second;
  }
  return w.from_ns;
}

}  // namespace ingero::store
