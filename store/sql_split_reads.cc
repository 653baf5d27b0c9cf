// SqlTraceSource's split reads: a large window's first read cut into slices at whole seconds,
// this connection reading them from the start while a second one, in a snapshot holding the
// same calls, reads them from the end into parts of the cache, on another thread.
#include <algorithm>
#include <future>
#include <mutex>

#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/read_snapshot.h"
#include "store/sql_reads_internal.h"
#include "store/sql_trace_source.h"

namespace ingero::store {

using reads::merge_rows_and_runs;

std::optional<std::string> SqlTraceSource::folding_state() {
  Db& db = reader_.db();
  auto version = db.query_int("PRAGMA schema_version");
  if (!version || !*version) return std::nullopt;
  if (has_call_store(db)) {
    // Schema 10: host events are appended (schema 11: a block of them rewritten while it
    // fills, its last id); a block of calls is rewritten while it fills (its last id), folded
    // when full (kept_data), folded for good as it ages (full goes). Each part coalesced: a
    // file without host events would make the whole NULL, and a fold go unseen.
    auto st = db.prepare(
        std::string("SELECT coalesce((SELECT ") +
        (has_host_store(db) ? "max(last_id) FROM main.host_store" : "max(id) FROM main.host_rows") +
        "), 0) || '/' || (SELECT "
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
  cache_.set_expected(expected_calls_ / 2);  // it reads about half the window's calls
  later_.clear();
  later_.resize(s->starts.size());
  // The other connection reads slices from the end, each into its own part of the cache, this
  // one from the start, until they meet.
  s->done = std::async(std::launch::async, [this, sl = s.get()] {
    SqlTraceSource& o = *sl->other;
    ReadSnapshot end(o.reader_.db(), ReadSnapshot::kAdopt);  // begun by open_matching
    size_t budget = sl->limit - sl->limit / 2;
    while (auto i = sl->queue.take(false)) {
      CallCache& part = later_[*i];
      part.set_limit(budget);
      part.set_stop(&cache_abandoned_);  // this side's cache gave up: the whole will not fit
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
  cache_.set_expected(expected_calls_);
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

}  // namespace ingero::store
