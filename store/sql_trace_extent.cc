// The trace's span and nodes (SqlTraceSource::extent, node_span): one pass over a file's events,
// split into ranges of ids read on two connections, or the blocks' entries of a call store.
#include <atomic>
#include <future>

#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/legacy_views.h"
#include "store/sql_trace_source.h"  // IWYU pragma: associated

namespace ingero::store {

namespace {

// The span and the range of node names of the events `where` picks.
struct ExtentPart {
  int64_t first = INT64_MAX, last = INT64_MIN;
  std::optional<std::pair<std::string, std::string>> nodes;  // min, max
};

// `runs`: the span of the runs instead (folded calls are part of the trace's span too).
// Blocks: the span and nodes of the archived calls or runs, from the blocks' entries. A legacy
// file's events: those with a time, each to the end of its duration where it has one
// (store/legacy_views.h).
enum class Part { kEvents, kLegacyEvents, kRuns, kCallBlocks, kRunBlocks };
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
      break;
    case Part::kLegacyEvents:  // read whole (`where` is ""): its rows are not split by id
      sql = "SELECT min(timestamp), max(" + legacy_end_sql("") + ")" + nodes +
            " FROM main.events WHERE " + legacy_has_time_sql("");
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
      parts[i] = i < ranges.size()
                     ? scan_extent(on, by_node, ranges[i],
                                   reader_.is_legacy() ? Part::kLegacyEvents : Part::kEvents)
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
    else if (reader_.is_legacy())
      add("SELECT node, min(timestamp), max(" + legacy_end_sql("") +
          ") FROM main.events NOT INDEXED WHERE " + legacy_has_time_sql("") + " GROUP BY node");
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

}  // namespace ingero::store
