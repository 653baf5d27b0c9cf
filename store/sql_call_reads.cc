// SqlTraceSource's reads of the calls: the first read of a window fills the call cache
// (store/call_cache.h) that the engine's later passes read; a large window's first read is
// split in two by time and its later part read on a second connection, on another thread
// (store/sql_split_reads.cc).
#include <algorithm>
#include <functional>
#include <future>
#include <mutex>

#include "hal/memory.h"
#include "store/call_archive.h"
#include "store/call_count_check.h"
#include "store/call_store.h"
#include "store/folded_calls.h"
#include "store/read_snapshot.h"
#include "store/sql_reads_internal.h"
#include "store/sql_trace_source.h"

namespace ingero::store {
namespace reads {

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

}  // namespace reads

using reads::merge_rows_and_runs;

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
  // Calls folded into runs by tiered retention come in start order among the others. The
  // runs and the rows are read in one snapshot, and the calls expected (may_fit_cache) counted
  // in it: a trace being written folds while it is read, and a call moved from its row into a
  // run between two reads would be missed.
  ReadSnapshot snapshot(reader_.db());
  Fill fill{*this, fn, run, cache_state_ == CacheState::kEmpty};
  expected_calls_ = 0;
  if (fill.on && !may_fit_cache(w, expected_calls_)) {  // not filled only to be thrown away
    fill.on = false;
    cache_state_ = CacheState::kTooBig;
  }
  cache_.set_expected(fill.on ? expected_calls_ : 0);
  cache_abandoned_.store(false);
  // The calls read are checked against the file's own counts, in the same snapshot: a damaged
  // time index ends a read early without an error (store/call_count_check.h).
  std::optional<CallCountCheck> count;
  if (!reader_.is_legacy() && snapshot.consistent()) {
    count.emplace(filter(w, true), plan_span_ ? *plan_span_ : extent().span);
    fill.count = &*count;
  }
  // A large window's later part is read on a second connection whose snapshot holds the
  // same calls, into `later_`, while this one reads the earlier part; each may fill half the
  // cache.
  if (fill.on) last_slices_.clear();
  std::unique_ptr<Slices> slices;
  // Only in a transaction (this read's, or a caller's: explain's, an MCP tool's), whose state
  // the second connection is checked to match.
  if (fill.on && in_transaction(reader_.db())) slices = start_slices(w);
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

namespace {

// The calls `read` gives (calls, and runs of calls folded by tiered retention), to `fn` in
// time order: each run expanded into its calls, merged with the others.
void expand_runs(
    const engine::Window& w, const engine::EventFn& fn,
    const std::function<void(const engine::EventFn&, const engine::CallRunFn&)>& read) {
  RunExpander folded(w.from_ns, w.to_ns);
  hal::Event f;
  read(
      [&](const hal::Event& e) {
        // Not by next_ts() alone: a call at INT64_MAX (a damaged or hand-edited file) met the
        // sentinel, and an empty expander was asked for its next call (export: SIGSEGV).
        while (!folded.done() && folded.next_ts() <= int64_t(e.ts_ns))
          if (folded.next(f)) fn(f);
        fn(e);
      },
      [&](const engine::CallRun& r) { folded.add(r); });
  while (!folded.done())
    if (folded.next(f)) fn(f);
}

}  // namespace

void SqlTraceSource::calls(const engine::Window& w, const engine::EventFn& fn) {
  expand_runs(w, fn, [&](const engine::EventFn& call, const engine::CallRunFn& run) {
    read_calls(w, call, run);
  });
}

void SqlTraceSource::stored_calls(const engine::Window& w, const engine::EventFn& fn) {
  EventFilter f = filter(w, true);
  f.rows = true;
  ReadSnapshot snapshot(reader_.db());
  std::optional<CallCountCheck> count;
  if (!reader_.is_legacy() && snapshot.consistent())
    count.emplace(f, plan_span_ ? *plan_span_ : extent().span);
  ingero::Status st;
  expand_runs(w, fn, [&](const engine::EventFn& call, const engine::CallRunFn& run) {
    st = merge_rows_and_runs(
        reader_.db(), strings_, f, INT64_MIN,
        [&](const hal::Event& e) {
          if (count) count->add(int64_t(e.ts_ns));
          call(e);
          return true;
        },
        [&](const engine::CallRun& r) {
          if (count) count->add_run(r);
          run(r);
          return true;
        });
  });
  if (st && count) st = count->verify(reader_.db());
  if (!st) fail(st.error());
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

bool SqlTraceSource::may_fit_cache(const engine::Window& w, uint64_t& calls) {
  constexpr uint64_t kMinBytesPerCall = 8;
  calls = 0;
  if (cache_.limit() == SIZE_MAX || !reader_.db().table_exists("call_seconds") ||
      has_folded_calls(w))
    return true;
  auto st = prepare("SELECT coalesce(sum(calls), 0) FROM call_seconds" +
                    window_sql(w, "timestamp", true));
  if (!st || !row(*st)) return true;
  calls = uint64_t(std::max<int64_t>(0, st->int64(0)));
  return calls * kMinBytesPerCall <= cache_.limit();
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