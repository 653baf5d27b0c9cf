#include "store/sql_trace_source.h"

#include "hal/memory.h"
#include "hal/symbolizer.h"
#include "store/folded_calls.h"
#include "store/sketch_sql.h"
#include "store/stacks.h"

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
}

SqlTraceSource::~SqlTraceSource() {
  if (parent_ && !error_.empty()) parent_->fail(ingero::make_error(error_));
}

std::unique_ptr<engine::TraceSource> SqlTraceSource::open_another() {
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

size_t SqlTraceSource::default_call_cache_bytes() {
  return hal::memory_share(hal::read_memory_info(), kMinCallCacheBytes, kMaxCallCacheBytes);
}

void SqlTraceSource::set_call_cache(size_t max_bytes) {
  cache_.clear();
  cache_.set_limit(max_bytes);
  cache_state_ = max_bytes ? CacheState::kEmpty : CacheState::kOff;
}

bool SqlTraceSource::cache_covers(const engine::Window& w) const {
  return cache_state_ == CacheState::kFull && w.from_ns >= cached_.from_ns &&
         w.to_ns <= cached_.to_ns && (!cached_.pid || cached_.pid == w.pid) &&
         cached_.node == w.node;
}

void SqlTraceSource::read_calls(const engine::Window& w, const engine::EventFn& fn,
                                const engine::CallRunFn& run) {
  if (cache_covers(w)) {
    cache_.for_each(
        [&](const hal::Event& e) {
          if (int64_t(e.ts_ns) < w.from_ns || int64_t(e.ts_ns) > w.to_ns) return;
          if (w.pid && e.pid != *w.pid) return;
          fn(e);
        },
        [&](const engine::CallRun& r) {
          if (r.ts_ns > w.to_ns || r.last_start() < w.from_ns) return;
          if (w.pid && r.pid != *w.pid) return;
          run(r);
        });
    return;
  }
  bool fill = cache_state_ == CacheState::kEmpty;
  if (fill && !may_fit_cache(w)) {  // not filled only to be thrown away
    fill = false;
    cache_state_ = CacheState::kTooBig;
  }
  auto too_big = [&] {
    fill = false;
    cache_.clear();
    cache_state_ = CacheState::kTooBig;
  };
  auto keep_call = [&](const hal::Event& e) {
    if (fill && !cache_.add(e)) too_big();
    fn(e);
  };
  auto keep_run = [&](const engine::CallRun& r) {
    if (fill && !cache_.add_run(r)) too_big();
    run(r);
  };
  // Calls folded into runs by tiered retention come in start order among the others. The
  // runs and the rows are read in one snapshot: a trace being written folds while it is read,
  // and a call moved from its row into a run between two reads would be missed.
  // Only when no statement of the connection is running: its COMMIT would fail, and the
  // connection would keep an old snapshot.
  sqlite3* h = reader_.db().handle();
  bool busy = false;
  for (sqlite3_stmt* st = sqlite3_next_stmt(h, nullptr); st; st = sqlite3_next_stmt(h, st))
    busy = busy || sqlite3_stmt_busy(st);
  bool snapshot = !busy && sqlite3_get_autocommit(h) != 0 && reader_.db().exec("BEGIN").ok();
  struct EndSnapshot {
    Db& db;
    bool on;
    ~EndSnapshot() {
      if (on) (void)db.exec("COMMIT");
    }
  } end_snapshot{reader_.db(), snapshot};
  auto runs = RunCursor::open(reader_.db(), filter(w, true), strings_);
  if (!runs) {
    fail(runs.error());
    return;
  }
  // The runs are read alongside the rows: the next one waits in `r` until its start is due.
  engine::CallRun r;
  ingero::Status st;
  auto advance = [&]() -> bool {
    auto more = (*runs)->next(r);
    if (!more) st = more.error();
    return more && *more;
  };
  bool pending = advance();
  if (st)
    st = for_each_event(reader_.db(), EventCursor::Rows::kCalls, filter(w, true), strings_,
                        [&](const hal::Event& e) -> ingero::Status {
                          while (pending && r.ts_ns <= int64_t(e.ts_ns)) {
                            keep_run(r);
                            pending = advance();
                          }
                          keep_call(e);
                          return st;
                        });
  while (st && pending) {
    keep_run(r);
    pending = advance();
  }
  if (!st) fail(st.error());
  if (fill && st) {
    cache_state_ = CacheState::kFull;
    cached_ = w;
  } else if (fill) {
    cache_.clear();  // a read that failed part-way is not kept
  }
}

void SqlTraceSource::calls(const engine::Window& w, const engine::EventFn& fn) {
  // Runs are expanded into their calls, merged in time order with the rows.
  RunExpander folded(w.from_ns, w.to_ns);
  hal::Event f;
  read_calls(
      w,
      [&](const hal::Event& e) {
        while (folded.next_ts() <= int64_t(e.ts_ns))
          if (folded.next(f)) fn(f);
        fn(e);
      },
      [&](const engine::CallRun& r) { folded.add(r); });
  while (folded.next_ts() != INT64_MAX)
    if (folded.next(f)) fn(f);
}

void SqlTraceSource::call_runs(const engine::Window& w, const engine::EventFn& fn,
                               const engine::CallRunFn& run) {
  read_calls(w, fn, [&](const engine::CallRun& r) {
    if (r.inside(w.from_ns, w.to_ns)) {
      run(r);
      return;
    }
    r.for_each_call([&](const hal::Event& e) {  // a run straddling an edge of the window
      if (w.contains(int64_t(e.ts_ns))) fn(e);
    });
  });
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

const SqlTraceSource::Extent& SqlTraceSource::extent() {
  Db& db = reader_.db();
  auto version = db.query_int("PRAGMA data_version");
  int64_t v = version && *version ? **version : -1;
  if (extent_ && extent_->data_version == v && v != -1) return *extent_;
  // One pass over the events gives the span and, unless the file was merged from several,
  // the node: they were three passes (two each time the span was asked for), a third of
  // explain's start on 10 M events.
  Extent x;
  x.data_version = v;
  bool by_node = db.column_exists("events", "node");
  auto st = prepare(std::string("SELECT min(timestamp), max(timestamp + duration)") +
                    (by_node ? ", min(node), max(node)" : "") + " FROM events");
  int64_t first = INT64_MAX, last = INT64_MIN;
  if (st && row(*st) && !st->is_null(0)) {
    first = st->int64(0);
    last = st->int64(1);
    if (by_node && st->text(2) == st->text(3)) {
      x.nodes.push_back(st->text(2));
    } else if (by_node) {
      auto names = prepare("SELECT DISTINCT node FROM events ORDER BY node");
      while (names && row(*names)) x.nodes.push_back(names->text(0));
    }
  }
  // Folded calls (tiered retention) are part of the trace's span too.
  if (db.table_exists("call_runs"))
    if (auto runs = prepare("SELECT min(timestamp), max(timestamp + span_ns) FROM call_runs");
        runs && row(*runs) && !runs->is_null(0)) {
      first = std::min(first, runs->int64(0));
      last = std::max(last, runs->int64(1));
    }
  if (first != INT64_MAX) x.span = {first, last};
  extent_ = std::move(x);
  return *extent_;
}

std::vector<std::string> SqlTraceSource::nodes() { return extent().nodes; }

std::pair<int64_t, int64_t> SqlTraceSource::time_span() { return extent().span; }

uint64_t SqlTraceSource::event_count(const engine::Window& w) {
  std::string sql = "SELECT count(*) FROM events" +
                    window_sql(w, "timestamp", false, reader_.db().column_exists("events", "node"));
  auto st = prepare(sql);
  if (!st || !row(*st)) return 0;
  uint64_t n = uint64_t(st->int64(0));
  // Calls folded into runs (tiered retention) are events of the trace all the same; a run
  // counts where it starts.
  if (reader_.db().table_exists("call_runs"))
    if (auto runs = prepare("SELECT coalesce(sum(calls), 0) FROM call_runs" +
                            window_sql(w, "timestamp", false));
        runs && row(*runs))
      n += uint64_t(runs->int64(0));
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

std::optional<engine::TraceLosses> SqlTraceSource::losses() {
  if (reader_.is_legacy()) return std::nullopt;
  Db& db = reader_.db();
  engine::TraceLosses l;
  l.by_kind = db.column_exists("sessions", "call_drops");
  auto col = [&](const char* c) {
    return db.column_exists("sessions", c) ? "coalesce(sum(" + std::string(c) + "), 0)"
                                           : std::string("0");
  };
  auto st = prepare("SELECT " + col("ringbuf_drops") + ", " + col("call_drops") + ", " +
                    col("stack_drops") + ", " + col("host_drops") + ", " + col("sample_drops") +
                    ", " + col("lost_calls") + ", " + col("calls_lost_at_exit") + ", " +
                    col("store_errors") + " FROM sessions");
  if (!st || !row(*st)) return std::nullopt;
  uint64_t* out[] = {&l.ringbuf_drops, &l.call_drops, &l.stack_drops,        &l.host_drops,
                     &l.sample_drops,  &l.lost_calls, &l.calls_lost_at_exit, &l.store_errors};
  for (int i = 0; i < 8; ++i) *out[i] = uint64_t(st->int64(i));
  return l;
}

bool SqlTraceSource::may_fit_cache(const engine::Window& w) {
  constexpr uint64_t kMinBytesPerCall = 8;
  if (cache_.limit() == SIZE_MAX || !reader_.db().table_exists("call_seconds") ||
      has_folded_calls(w))
    return true;
  auto st = prepare("SELECT coalesce(sum(calls), 0) FROM call_seconds" +
                    window_sql(w, "timestamp", true));
  return !st || !row(*st) || uint64_t(st->int64(0)) * kMinBytesPerCall <= cache_.limit();
}

bool SqlTraceSource::has_folded_calls(const engine::Window& w) {
  if (!reader_.db().table_exists("call_runs")) return false;
  std::string sql = "SELECT 1 FROM call_runs WHERE timestamp <= " + std::to_string(w.to_ns) +
                    " AND timestamp + span_ns >= " + std::to_string(w.from_ns);
  if (w.pid) sql += " AND pid = " + std::to_string(*w.pid);
  if (w.node) sql += " AND node = " + sql_quote(*w.node);
  auto st = prepare(sql + " LIMIT 1");
  return st && row(*st);
}

std::optional<std::vector<engine::CallSketch>> SqlTraceSource::folded_call_sketches(
    const engine::Window& w) {
  if (!has_folded_calls(w) || !reader_.db().table_exists("call_seconds")) return std::nullopt;
  // The seconds that overlap the window: a summary covers the calls that started in its second.
  engine::Window secs = w;
  secs.from_ns = w.from_ns == INT64_MIN ? w.from_ns : w.from_ns - 999999999;
  auto st = prepare(
      "SELECT c.pid, s.vendor, s.api, o.name, c.sketch FROM call_seconds c "
      "JOIN sources s ON s.id = c.source JOIN ops o ON o.source_id = c.source AND o.op_id = c.op" +
      window_sql(secs, "c.timestamp", false, false) +
      (w.pid ? " AND c.pid = " + std::to_string(*w.pid) : std::string()) +
      (w.node ? " AND c.node = " + sql_quote(*w.node) : std::string()));
  if (!st) return std::nullopt;
  std::map<std::tuple<uint32_t, std::string, std::string, std::string>, engine::QuantileSketch> m;
  while (row(*st)) {
    auto sk = sketch_column(st->get(), 4);
    if (!sk) {
      fail(ingero::make_error(reader_.db().path() + ": a damaged call_seconds sketch"));
      return std::nullopt;
    }
    m[{uint32_t(st->int64(0)), st->text(1), st->text(2), st->text(3)}].merge(*sk);
  }
  std::vector<engine::CallSketch> out;
  for (auto& [k, sk] : m)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::move(sk)});
  return out;
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
