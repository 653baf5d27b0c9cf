// What store/sql_call_reads.cc and store/sql_split_reads.cc share: the merge of a window's rows
// and runs, and where a window's first read goes.
#pragma once

#include <functional>

#include "store/call_count_check.h"
#include "store/event_rows.h"
#include "store/sql_trace_source.h"

namespace ingero::store::reads {

// The rows of `f` and the runs overlapping it that start at or after `runs_from`, in start
// order: each run waits until its start is due. `call` and `run` return false to stop.
ingero::Status merge_rows_and_runs(Db& db, StringPool& strings, const EventFilter& f,
                                   int64_t runs_from,
                                   const std::function<bool(const hal::Event&)>& call,
                                   const std::function<bool(const engine::CallRun&)>& run);

}  // namespace ingero::store::reads

namespace ingero::store {

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
    s.cache_abandoned_.store(true);
    s.cache_.clear();
    s.cache_state_ = CacheState::kTooBig;
  }
};

}  // namespace ingero::store
