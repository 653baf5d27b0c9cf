// SqlTraceSource's reads of the calls: the first read of a window fills the call cache
// (store/call_cache.h) that the engine's later passes read; a large window's first read is
// split in two by time and its later part read on a second connection, on another thread.
#include <algorithm>
#include <functional>
#include <future>
#include <mutex>

#include "hal/memory.h"
#include "store/call_archive.h"
#include "store/call_count_check.h"
#include "store/call_store.h"
#include "store/folded_calls.h"
#include "store/sql_trace_source.h"

namespace ingero::store {
namespace {

// The rows of `f` and the runs overlapping it that start at or after `runs_from`, in start
// order: each run waits until its start is due. `call` and `run` return false to stop.
ingero::Status merge_rows_and_runs(Db& db, StringPool& strings, const EventFilter& f,
                                   int64_t runs_from,
                                   const std::function<bool(const hal::Event&)>& call,
                                   const std::function<bool(const engine::CallRun&)>& run) {
  auto runs = RunCursor::open(db, f, strings, runs_from);
  if (!runs) return runs.error();
  engine::CallRun r;
  ingero::Status st;
  bool stop = false;
  auto advance = [&]() -> bool {
    auto more = (*runs)->next(r);
    if (!more) st = more.error();
    return more && *more;
  };
  bool pending = advance();
  if (!st) return st;
  auto rows = for_each_event(db, EventCursor::Rows::kCalls, f, strings,
                             [&](const hal::Event& e) -> ingero::Status {
                               while (!stop && pending && r.ts_ns <= int64_t(e.ts_ns)) {
                                 stop = !run(r);
                                 pending = advance();
                               }
                               stop = stop || !call(e);
                               if (!st) return st;
                               return stop ? ingero::make_error("stopped") : ingero::Status{};
                             });
  if (!st) return st;  // reading a run failed
  if (stop) return {};
  if (!rows) return rows;
  while (st && pending && run(r)) pending = advance();
  return st;
}

// A read transaction ended when the read is.
struct Snapshot {
  Db& db;
  bool on = false;
  ~Snapshot() {
    if (on) (void)db.exec("COMMIT");
  }
};

}  // namespace

size_t SqlTraceSource::default_call_cache_bytes() {
  return hal::memory_share(hal::read_memory_info(), kMinCallCacheBytes, kMaxCallCacheBytes);
}

void SqlTraceSource::set_call_cache(size_t max_bytes) {
  cache_.clear();
  later_.clear();
  cache_.set_limit(max_bytes);
  cache_state_ = max_bytes ? CacheState::kEmpty : CacheState::kOff;
}

bool SqlTraceSource::cache_covers(const engine::Window& w) const {
  return cache_state_ == CacheState::kFull && w.from_ns >= cached_.from_ns &&
         w.to_ns <= cached_.to_ns && (!cached_.pid || cached_.pid == w.pid) &&
         cached_.node == w.node;
}

std::optional<std::string> SqlTraceSource::folding_state() {
  Db& db = reader_.db();
  auto version = db.query_int("PRAGMA schema_version");
  if (!version || !*version) return std::nullopt;
  if (has_call_store(db)) {
    // Schema 10: host rows are appended; a block is rewritten while it fills (its last id),
    // folded when full (kept_data), folded for good as it ages (full goes). Each part
    // coalesced: a file without host rows would make the whole NULL, and a fold go unseen.
    auto st = db.prepare(
        "SELECT coalesce((SELECT max(id) FROM main.host_rows), 0) || '/' || (SELECT "
        "coalesce(max(id), 0) || '/' || coalesce(max(last_id), 0) || '/' || count(full) || '/' "
        "|| count(kept) || '/' || count(kept_data) || '/' || count(*) FROM main.call_store)");
    if (!st) return std::nullopt;
    auto r = st->step();
    if (!r || !*r) return std::nullopt;
    return std::to_string(**version) + "," + (st->is_null(0) ? std::string("-") : st->text(0));
  }
  std::string sql = "SELECT (SELECT max(id) FROM main.events)";
  // main.call_runs, not the TEMP view over it and its archive: that max(id) reads every
  // archived run (1 s at 100 M events), and is the table's anyway (archiving leaves its newest
  // row). Archiving runs shows in run_blocks' below.
  sql += db.table_exists("call_runs") ? ", (SELECT max(id) FROM main.call_runs)" : ", NULL";
  sql += db.table_exists("call_folding")
             ? ", (SELECT folded_calls || '/' || runs || '/' || last_event_id FROM call_folding)"
             : ", NULL";
  // Archiving moves rows into blocks. (Each part on its own: one table without blocks would
  // make the concatenation NULL, and an archive of the other go unseen.)
  sql += db.table_exists("call_blocks")
             ? ", coalesce((SELECT max(id) FROM main.call_blocks), 0) || '/' || "
               "coalesce((SELECT max(id) FROM main.run_blocks), 0)"
             : ", NULL";
  auto st = db.prepare(sql);
  if (!st) return std::nullopt;
  auto r = st->step();
  if (!r || !*r) return std::nullopt;
  std::string out = std::to_string(**version);
  for (int i = 0; i < 4; ++i) out += "," + (st->is_null(i) ? std::string("-") : st->text(i));
  return out;
}

std::vector<int64_t> SqlTraceSource::slice_starts(const engine::Window& w) {
  Db& db = reader_.db();
  if (!split_items_ || reader_.is_legacy() || !db.table_exists("call_seconds")) return {};
  // Calls older than folded_before were mostly folded: they take (runs + kept rows) / calls
  // items each, the others one. An estimate: the slices are shared out as they are read.
  int64_t folded_before = INT64_MIN;
  double folded_items = 1;
  if (has_call_store(db)) {
    // Schema 10: every finished block is read folded, whatever its age.
    if (auto f = db.prepare(
            "SELECT coalesce(sum(kept + runs), 0), coalesce(sum(calls), 0), max(last_ts) FROM "
            "call_store WHERE kept IS NOT NULL");
        f && row(*f) && f->int64(1) > 0) {
      folded_before = f->int64(2);
      folded_items = std::clamp(double(f->int64(0)) / double(f->int64(1)), 0.0, 1.0);
    }
  } else if (db.table_exists("call_folding"))
    if (auto f = db.prepare(
            "SELECT f.folded_before, f.folded_calls, f.runs, (SELECT coalesce(sum(calls), 0) "
            "FROM call_seconds WHERE timestamp < f.folded_before) FROM call_folding f");
        f && row(*f) && f->int64(3) > 0) {
      folded_before = f->int64(0);
      double calls = double(f->int64(3));
      double items = double(f->int64(2)) + std::max(0.0, calls - double(f->int64(1)));
      folded_items = std::clamp(items / calls, 0.0, 1.0);
    }
  auto st = prepare("SELECT timestamp, sum(calls) FROM call_seconds" +
                    window_sql(w, "timestamp", true) + " GROUP BY timestamp ORDER BY timestamp");
  if (!st) return {};
  std::vector<std::pair<int64_t, double>> seconds;
  double total = 0;
  while (row(*st)) {
    double items = double(st->int64(1)) * (st->int64(0) < folded_before ? folded_items : 1.0);
    seconds.emplace_back(st->int64(0), items);
    total += items;
  }
  if (total < double(split_items_)) return {};
  constexpr size_t kMaxSlices = 32;  // of about half split_items_ or more each
  size_t n = std::clamp(size_t(total / double(split_items_ / 2 + 1)), size_t(2), kMaxSlices);
  std::vector<int64_t> out{w.from_ns};
  double before = 0;
  for (const auto& [second, items] : seconds) {
    if (before >= total * double(out.size()) / double(n) && second > out.back() &&
        second <= w.to_ns)
      out.push_back(second);
    before += items;
  }
  return out.size() > 1 ? out : std::vector<int64_t>{};
}

std::unique_ptr<SqlTraceSource> SqlTraceSource::open_matching(const std::string& state) {
  auto r = reader_.reopen();
  if (!r) return nullptr;
  std::unique_ptr<SqlTraceSource> other(new SqlTraceSource(std::move(*r), this));
  // A fold or an append committed between the two snapshots shows in their states: begin
  // again (a fold pass holds the file for at most a few hundred ms; the tracer commits a
  // batch at a time).
  constexpr int kTries = 3;
  for (int i = 0; i < kTries; ++i) {
    Db& db = other->reader_.db();
    if (!db.exec("BEGIN")) return nullptr;
    if (other->folding_state() == state) return other;
    (void)db.exec("COMMIT");
  }
  return nullptr;
}

SqlTraceSource::PartRead SqlTraceSource::fill_part(const engine::Window& w, int64_t runs_from,
                                                   CallCache& into) {
  bool fits = true;
  auto st = merge_rows_and_runs(
      reader_.db(), strings_, filter(w, true), runs_from,
      [&](const hal::Event& e) { return fits = into.add(e); },
      [&](const engine::CallRun& r) { return fits = into.add_run(r); });
  if (!st) {
    fail(st.error());
    return PartRead::kFailed;
  }
  return fits ? PartRead::kDone : PartRead::kTooBig;
}

// Where the first read of a window goes: to the pass that asked for it, and into the cache
// while it fits.
struct SqlTraceSource::Fill {
  SqlTraceSource& s;
  const engine::EventFn& fn;
  const engine::CallRunFn& run;
  bool on;
  CallCountCheck* count = nullptr;  // what is read, checked against the file's counts
  bool call(const hal::Event& e) {
    if (on && !s.cache_.add(e)) too_big();
    pass(e);
    return true;
  }
  bool add_run(const engine::CallRun& r) {
    if (on && !s.cache_.add_run(r)) too_big();
    pass_run(r);
    return true;
  }
  // To the pass only (already in the cache).
  void pass(const hal::Event& e) {
    if (count) count->add(int64_t(e.ts_ns));
    fn(e);
  }
  void pass_run(const engine::CallRun& r) {
    if (count) count->add_run(r);
    run(r);
  }
  void too_big() {  // later_, perhaps being filled meanwhile, is cleared once it is read
    on = false;
    s.cache_.clear();
    s.cache_state_ = CacheState::kTooBig;
  }
};

void SqlTraceSource::replay_cache(const engine::Window& w, const engine::EventFn& fn,
                                  const engine::CallRunFn& run) {
  std::vector<const CallCache*> parts{&cache_};
  for (const CallCache& part : later_) parts.push_back(&part);
  for (const CallCache* part : parts)
    part->for_each(
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
}

engine::Window SqlTraceSource::Slices::window(size_t i) const {
  engine::Window w = whole;
  w.from_ns = starts[i];
  if (i + 1 < starts.size()) w.to_ns = starts[i + 1] - 1;
  return w;
}

int64_t SqlTraceSource::Slices::runs_from(size_t i) const {
  return i == 0 ? INT64_MIN : starts[i];  // the first takes the runs begun before the window
}

void SliceQueue::reset(size_t n) {
  std::lock_guard lock(m_);
  lo_ = 0;
  end_ = n;
}

std::optional<size_t> SliceQueue::take(bool first) {
  std::lock_guard lock(m_);
  if (lo_ >= end_) return std::nullopt;
  return first ? lo_++ : --end_;
}

std::unique_ptr<SqlTraceSource::Slices> SqlTraceSource::start_slices(const engine::Window& w) {
  auto starts = slice_starts(w);
  if (starts.empty()) return nullptr;
  auto state = folding_state();
  if (!state) return nullptr;
  if (between_snapshots_) between_snapshots_();
  auto s = std::make_unique<Slices>();
  s->other = open_matching(*state);
  if (!s->other) return nullptr;
  s->whole = w;
  s->starts = std::move(starts);
  s->queue.reset(s->starts.size());
  s->state.assign(s->starts.size(), PartRead::kFailed);
  s->limit = cache_.limit();
  cache_.set_limit(s->limit / 2);
  later_.clear();
  later_.resize(s->starts.size());
  // The other connection reads slices from the end, each into its own part of the cache, this
  // one from the start, until they meet.
  s->done = std::async(std::launch::async, [this, sl = s.get()] {
    SqlTraceSource& o = *sl->other;
    Snapshot end{o.reader_.db(), true};  // begun by open_matching
    size_t budget = sl->limit - sl->limit / 2;
    while (auto i = sl->queue.take(false)) {
      CallCache& part = later_[*i];
      part.set_limit(budget);
      sl->state[*i] = o.fill_part(sl->window(*i), sl->runs_from(*i), part);
      if (sl->state[*i] != PartRead::kDone) return;
      budget -= std::min(budget, part.bytes());
    }
  });
  last_slices_ = s->starts;
  return s;
}

bool SqlTraceSource::hold(Slices& s, size_t mine) {
  if (!on_held_ || !(held_for_ == s.whole)) return false;
  for (size_t i = mine; i < s.starts.size(); ++i)
    if (s.state[i] != PartRead::kDone) return false;
  std::map<uint32_t, uint64_t> per_pid = cache_.calls_per_pid();
  for (size_t i = mine; i < s.starts.size(); ++i) {
    later_[i].intern_names(strings_);
    for (const auto& [pid, n] : later_[i].calls_per_pid()) per_pid[pid] += n;
  }
  // From here the cache and its parts are only read (this thread passes the parts on), and
  // kept whatever this read's end says.
  cached_ = s.whole;
  cache_state_ = CacheState::kFull;
  held_ = true;
  auto fn = std::move(on_held_);
  on_held_ = nullptr;
  fn(per_pid);
  return true;
}

ingero::Status SqlTraceSource::read_slices(Slices& s, Fill& fill) {
  auto keep_call = [&](const hal::Event& e) { return fill.call(e); };
  auto keep_run = [&](const engine::CallRun& r) { return fill.add_run(r); };
  ingero::Status st;
  size_t mine = 0;
  while (auto i = s.queue.take(true)) {
    mine = *i + 1;
    if (st)
      st = merge_rows_and_runs(reader_.db(), strings_, filter(s.window(*i), true), s.runs_from(*i),
                               keep_call, keep_run);
  }
  s.done.get();
  cache_.set_limit(s.limit);
  bool held = st && fill.on && hold(s, mine);
  // The other's slices, in order: from memory, or read here (in this connection's snapshot)
  // where they did not fit or were never read.
  for (size_t i = mine; i < s.starts.size(); ++i) {
    CallCache& part = later_[i];
    if (s.state[i] == PartRead::kDone) {
      // Before the other source, whose strings they point at, goes (done by hold()).
      if (!held) part.intern_names(strings_);
      part.for_each([&](const hal::Event& e) { fill.pass(e); },
                    [&](const engine::CallRun& r) { fill.pass_run(r); });
      continue;
    }
    part.clear();
    if (fill.on) fill.too_big();
    if (st)
      st = merge_rows_and_runs(reader_.db(), strings_, filter(s.window(i), true), s.runs_from(i),
                               keep_call, keep_run);
  }
  if (!fill.on) later_.clear();
  std::string other_error = s.other->error();
  s.other.reset();  // its error becomes this source's too
  if (st && !other_error.empty()) return ingero::make_error(other_error);
  return st;
}

void SqlTraceSource::read_calls(const engine::Window& w, const engine::EventFn& fn,
                                const engine::CallRunFn& run) {
  if (cache_covers(w)) {
    replay_cache(w, fn, run);
    return;
  }
  // A cache holding another window (one node of a merged file, then the next) gives way:
  // every pass over the new window would otherwise read it from the file again.
  if (cache_state_ == CacheState::kFull) {
    cache_.clear();
    later_.clear();
    cache_state_ = CacheState::kEmpty;
  }
  Fill fill{*this, fn, run, cache_state_ == CacheState::kEmpty};
  if (fill.on && !may_fit_cache(w)) {  // not filled only to be thrown away
    fill.on = false;
    cache_state_ = CacheState::kTooBig;
  }
  // Calls folded into runs by tiered retention come in start order among the others. The
  // runs and the rows are read in one snapshot: a trace being written folds while it is read,
  // and a call moved from its row into a run between two reads would be missed.
  // Only when no statement of the connection is running: its COMMIT would fail, and the
  // connection would keep an old snapshot.
  sqlite3* h = reader_.db().handle();
  bool busy = false;
  for (sqlite3_stmt* st = sqlite3_next_stmt(h, nullptr); st; st = sqlite3_next_stmt(h, st))
    busy = busy || sqlite3_stmt_busy(st);
  bool in_txn = busy || sqlite3_get_autocommit(h) == 0;  // a read transaction is open
  Snapshot snapshot{reader_.db(), !in_txn && reader_.db().exec("BEGIN").ok()};
  // The calls read are checked against the file's own counts, in the same snapshot: a damaged
  // time index ends a read early without an error (store/call_count_check.h).
  std::optional<CallCountCheck> count;
  if (!reader_.is_legacy() && (snapshot.on || in_txn)) {
    count.emplace(filter(w, true), plan_span_ ? *plan_span_ : extent().span);
    fill.count = &*count;
  }
  // A large window's later part is read on a second connection whose snapshot holds the
  // same calls, into `later_`, while this one reads the earlier part; each may fill half the
  // cache.
  if (fill.on) last_slices_.clear();
  std::unique_ptr<Slices> slices;
  if (fill.on && snapshot.on) slices = start_slices(w);
  ingero::Status st = slices ? read_slices(*slices, fill)
                             : merge_rows_and_runs(
                                   reader_.db(), strings_, filter(w, true), INT64_MIN,
                                   [&](const hal::Event& e) { return fill.call(e); },
                                   [&](const engine::CallRun& r) { return fill.add_run(r); });
  if (st && count) st = count->verify(reader_.db());
  if (!st) fail(st.error());
  on_held_ = nullptr;  // for this first read only
  if (held_) {
    // Other threads may be reading the calls held: they stay, and served from memory, even
    // where the read then failed (its count check): the source's error is sticky, so nothing
    // computed from them is reported, and a reader turned to the file would share this
    // thread's connection.
    held_ = false;
  } else if (fill.on && st) {
    cache_state_ = CacheState::kFull;
    cached_ = w;
  } else if (fill.on) {
    cache_.clear();  // a read that failed part-way is not kept
    later_.clear();
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
  if (has_call_store(reader_.db())) {
    // Schema 10: calls seen at entry only in a block that overlaps the window (their durations
    // are estimates: the quantiles come from the sketches of the timed ones), or runs of such
    // blocks (their rows, where the window is of one process).
    std::string overlap = "first_ts <= " + std::to_string(w.to_ns) +
                          " AND end_ts >= " + std::to_string(w.from_ns) +
                          (w.node ? " AND node = " + sql_quote(*w.node) : std::string());
    if (auto st =
            prepare("SELECT 1 FROM main.call_store WHERE untimed > 0 AND " + overlap + " LIMIT 1");
        st && row(*st))
      return true;
    std::string blocks = "runs > 0 AND " + overlap;
    if (!w.pid) {
      auto st = prepare("SELECT 1 FROM main.call_store WHERE " + blocks + " LIMIT 1");
      return st && row(*st);
    }
    BlockForm form = engine_runs_form();
    form.filter += " AND " + blocks;
    ArchiveScan scan(reader_.db().handle(), form, reader_.db().path(),
                     {"timestamp", "id", "pid", "span_ns"}, 0, 1);
    int rc = scan.start({}, false);
    for (; rc == SQLITE_OK && !scan.eof(); rc = scan.next()) {
      auto r = scan.current();
      if (uint32_t(r.int64(2)) == *w.pid && r.int64(0) <= w.to_ns &&
          r.int64(0) + r.int64(3) >= w.from_ns)
        return true;
    }
    if (rc != SQLITE_OK) fail(ingero::make_error(scan.error()));
    return false;
  }
  if (!reader_.db().table_exists("call_runs")) return false;
  std::string where = " WHERE timestamp <= " + std::to_string(w.to_ns) +
                      " AND timestamp + span_ns >= " + std::to_string(w.from_ns);
  if (w.pid) where += " AND pid = " + std::to_string(*w.pid);
  if (w.node) where += " AND node = " + sql_quote(*w.node);
  if (auto st = prepare("SELECT 1 FROM main.call_runs" + where + " LIMIT 1"); st && row(*st))
    return true;
  if (!has_run_archive(reader_.db())) return false;
  // Archived runs: only the blocks whose time overlaps the window are read.
  auto blocks = prepare("SELECT first_id, last_id FROM main.run_blocks WHERE first_ts <= " +
                        std::to_string(w.to_ns) + " AND end_ts >= " + std::to_string(w.from_ns) +
                        (w.node ? " AND node = " + sql_quote(*w.node) : std::string()));
  while (blocks && row(*blocks))
    if (auto st = prepare("SELECT 1 FROM temp.archived_runs" + where + " AND id BETWEEN " +
                          std::to_string(blocks->int64(0)) + " AND " +
                          std::to_string(blocks->int64(1)) + " LIMIT 1");
        st && row(*st))
      return true;
  return false;
}

}  // namespace ingero::store
