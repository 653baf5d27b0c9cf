#include "store/sql_trace_source.h"

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

std::map<uint32_t, engine::ProcessInfo> SqlTraceSource::processes() {
  std::map<uint32_t, engine::ProcessInfo> out;
  bool has_cmd = reader_.db().column_exists("process_names", "cmdline");
  auto st = prepare(std::string("SELECT pid, name, ") + (has_cmd ? "cmdline" : "''") +
                    " FROM process_names");
  if (!st) return out;
  while (row(*st)) {
    engine::ProcessInfo p;
    p.pid = uint32_t(st->int64(0));
    p.name = st->text(1);
    p.cmdline = st->text(2);
    out[p.pid] = p;
  }
  return out;
}

namespace {

// The span and the range of node names of the events `where` picks.
struct ExtentPart {
  int64_t first = INT64_MAX, last = INT64_MIN;
  std::optional<std::pair<std::string, std::string>> nodes;  // min, max
};

// `runs`: the span of the runs instead (folded calls are part of the trace's span too).
// Blocks: the span and nodes of the archived calls or runs, from the blocks' entries.
enum class Part { kEvents, kRuns, kCallBlocks, kRunBlocks };
ingero::Result<ExtentPart> scan_extent(Db& db, bool by_node, const std::string& where, Part part) {
  by_node = by_node && part != Part::kRuns && part != Part::kRunBlocks;
  std::string nodes = by_node ? ", min(node), max(node)" : "";
  std::string sql;
  switch (part) {
    case Part::kRuns:
      sql = "SELECT min(timestamp), max(timestamp + span_ns) FROM main.call_runs";
      break;
    case Part::kCallBlocks:
      sql = "SELECT min(first_ts), max(end_ts)" + nodes + " FROM main.call_blocks";
      break;
    case Part::kRunBlocks:
      sql = "SELECT min(first_ts), max(end_ts) FROM main.run_blocks";
      break;
    case Part::kEvents:
      sql =
          "SELECT min(timestamp), max(timestamp + duration)" + nodes + " FROM main.events" + where;
  }
  auto st = db.prepare(sql);
  if (!st) return st.error();
  auto r = st->step();
  if (!r) return r.error();
  ExtentPart p;
  if (*r && !st->is_null(0)) {
    p.first = st->int64(0);
    p.last = st->int64(1);
    if (by_node) p.nodes.emplace(st->text(2), st->text(3));
  }
  return p;
}

}  // namespace

const SqlTraceSource::Extent& SqlTraceSource::extent() {
  Db& db = reader_.db();
  auto version = db.query_int("PRAGMA data_version");
  int64_t v = version && *version ? **version : -1;
  if (extent_ && extent_->data_version == v && v != -1) return *extent_;
  // One pass over the events gives the span and, unless the file was merged from several,
  // the node: they were three passes (two each time the span was asked for), a third of
  // explain's start on 10 M events. A large file's rows are read in ranges of ids that this
  // connection and a second one take in turn (folding leaves the older ids sparse), and the
  // runs as one more range.
  constexpr int64_t kSplitRows = 200000;
  constexpr int64_t kRanges = 16;
  Extent x;
  x.data_version = v;
  if (has_call_store(db)) {
    extent_ = store_extent();
    extent_->data_version = v;
    return *extent_;
  }
  bool by_node = db.column_exists("events", "node");
  // The parts after the events' ranges, each on its own.
  std::vector<Part> more;
  if (db.table_exists("call_runs")) more.push_back(Part::kRuns);
  if (has_call_archive(db)) more.push_back(Part::kCallBlocks);
  if (has_run_archive(db)) more.push_back(Part::kRunBlocks);
  std::vector<std::string> ranges{""};  // an events range each, then the runs, the blocks
  if (!reader_.is_legacy())
    if (auto ids =
            prepare("SELECT (SELECT min(id) FROM main.events), (SELECT max(id) FROM main.events)");
        ids && row(*ids) && !ids->is_null(0) && ids->int64(1) - ids->int64(0) > kSplitRows) {
      int64_t lo = ids->int64(0), step = (ids->int64(1) - lo) / kRanges + 1;
      ranges.clear();
      for (int64_t k = 0; k < kRanges; ++k)
        ranges.push_back(" WHERE id >= " + std::to_string(lo + k * step) + " AND id < " +
                         std::to_string(lo + (k + 1) * step));
    }
  std::unique_ptr<TraceReader> other;
  if (ranges.size() > 1)
    if (auto r = reader_.reopen()) other = std::move(*r);
  size_t tasks = ranges.size() + more.size();
  std::vector<ingero::Result<ExtentPart>> parts(tasks, ExtentPart{});
  std::atomic<size_t> next{0};
  auto work = [&](Db& on) {
    for (size_t i = next++; i < tasks; i = next++)
      parts[i] = i < ranges.size() ? scan_extent(on, by_node, ranges[i], Part::kEvents)
                                   : scan_extent(on, by_node, "", more[i - ranges.size()]);
  };
  std::future<void> helper;
  if (other) helper = std::async(std::launch::async, [&] { work(other->db()); });
  work(db);
  if (helper.valid()) helper.get();
  ExtentPart all;
  for (auto& p : parts) {
    if (!p) {
      fail(p.error());
      continue;
    }
    all.first = std::min(all.first, p->first);
    all.last = std::max(all.last, p->last);
    if (p->nodes && all.nodes) {
      all.nodes->first = std::min(all.nodes->first, p->nodes->first);
      all.nodes->second = std::max(all.nodes->second, p->nodes->second);
    } else if (p->nodes) {
      all.nodes = p->nodes;
    }
  }
  if (all.nodes && all.nodes->first == all.nodes->second) {
    x.nodes.push_back(all.nodes->first);
  } else if (all.nodes) {
    auto names = prepare(node_names_sql(db));
    while (names && row(*names)) x.nodes.push_back(names->text(0));
  }
  if (all.first != INT64_MAX) x.span = {all.first, all.last};
  extent_ = std::move(x);
  return *extent_;
}

SqlTraceSource::Extent SqlTraceSource::store_extent() {
  Extent x;
  std::set<std::string> nodes;
  ExtentPart all;
  bool host_store = has_host_store(reader_.db());
  for (const char* sql : {host_store ? "SELECT min(first_ts), max(end_ts) FROM main.host_store"
                                     : "SELECT min(timestamp), max(timestamp + duration) FROM "
                                       "main.host_rows",
                          "SELECT min(first_ts), max(end_ts) FROM main.call_store",
                          "SELECT DISTINCT node FROM main.call_store",
                          host_store ? "SELECT DISTINCT node FROM main.host_store"
                                     : "SELECT DISTINCT node FROM main.host_rows"}) {
    auto st = prepare(sql);
    bool names = std::string_view(sql).find("DISTINCT") != std::string_view::npos;
    while (st && row(*st)) {
      if (names) {
        nodes.insert(st->text(0));
      } else if (!st->is_null(0)) {
        all.first = std::min(all.first, st->int64(0));
        all.last = std::max(all.last, st->int64(1));
      }
    }
  }
  x.nodes.assign(nodes.begin(), nodes.end());
  if (all.first != INT64_MAX) x.span = {all.first, all.last};
  return x;
}

std::vector<std::string> SqlTraceSource::nodes() { return extent().nodes; }

bool SqlTraceSource::covers_file(const engine::Window& w) {
  if (reader_.is_legacy()) return false;
  auto [first, last] = plan_span_ ? *plan_span_ : extent().span;
  return w.from_ns <= first && w.to_ns >= last;
}

std::pair<int64_t, int64_t> SqlTraceSource::time_span() { return extent().span; }

std::pair<int64_t, int64_t> SqlTraceSource::node_span(const std::string& node) {
  const Extent& x = extent();
  if (x.nodes.size() <= 1) return x.span;
  if (!node_spans_ || node_spans_->data_version != x.data_version) {
    NodeSpans n;
    n.data_version = x.data_version;
    auto add = [&](const std::string& sql) {
      auto st = prepare(sql);
      while (st && row(*st)) {
        auto [it, fresh] = n.by_node.try_emplace(st->text(0), st->int64(1), st->int64(2));
        if (fresh) continue;
        it->second.first = std::min(it->second.first, st->int64(1));
        it->second.second = std::max(it->second.second, st->int64(2));
      }
    };
    bool store = has_call_store(reader_.db());
    if (has_host_store(reader_.db()))
      add("SELECT node, min(first_ts), max(end_ts) FROM main.host_store GROUP BY node");
    else
      add(std::string("SELECT node, min(timestamp), max(timestamp + duration) FROM ") +
          (store ? "main.host_rows" : "main.events") + " NOT INDEXED GROUP BY node");
    if (store) add("SELECT node, min(first_ts), max(end_ts) FROM main.call_store GROUP BY node");
    if (has_call_archive(reader_.db()))
      add("SELECT node, min(first_ts), max(end_ts) FROM main.call_blocks GROUP BY node");
    if (reader_.db().table_exists("call_runs"))
      add("SELECT node, min(timestamp), max(timestamp + span_ns) FROM main.call_runs NOT INDEXED "
          "GROUP BY node");
    if (has_run_archive(reader_.db()))
      add("SELECT node, min(first_ts), max(end_ts) FROM main.run_blocks GROUP BY node");
    node_spans_ = std::move(n);
  }
  auto it = node_spans_->by_node.find(node);
  return it == node_spans_->by_node.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
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
    auto st =
        prepare(std::string("SELECT count(*) FROM ") + (store ? "main.host_rows" : "main.events") +
                window_sql(w, "timestamp", false, by_node));
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
  for (const LibraryRow& r : *late) l.late_libraries.push_back({r.path, r.late_pid, r.late_ns});
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
