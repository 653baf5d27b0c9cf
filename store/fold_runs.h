// How tiered retention folds launches into runs (store/tiers.h), apart from where the rows come
// from and where the runs go: folding the rows of `events` (tiers.cc) and folding a block of
// calls as it is archived (call_archive.cc) decide alike.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"
#include "store/tiers.h"

namespace ingero::store {

// One event row as folding sees it.
struct FoldRow {
  int64_t id = 0, ts = 0, dur = 0;
  uint32_t pid = 0, tid = 0;
  int source = 0, op = 0;
  bool call = false;      // a GPU call (not a host event)
  bool archived = false;  // read from call_blocks (store/call_archive.h), not main.events
  bool foldable = false;  // a launch that says nothing on its own
  uint32_t row = 0;       // where it was read (a block's row)
  int64_t session = 0, cgroup = 0, stack = 0, nested = 0;
  std::optional<int64_t> library, stream, device;
  std::string node, comm;
};

// Consecutive folded calls of one thread and op, on one stream: one call_runs row.
struct FoldRun {
  std::vector<const FoldRow*> calls;  // in start order; the first gives the run its fields
  int64_t end = 0, sum = 0, min = INT64_MAX, max = 0, nested = 0;
  const FoldRow& first() const { return *calls.front(); }
};

// Reads the launch ops, the call sources and each (node, process, launch op)'s fold limit from
// the dictionaries and the summaries.
ingero::Status read_limits(Db& db, FoldLimits& f);
// The same where `f` was never read, or was read for a time more than 30 s of trace time before
// `at_ns`; `f` is then read for `at_ns`.
ingero::Status refresh_limits(Db& db, FoldLimits& f, int64_t at_ns);

// Sets w.foldable for call row `w`: `eligible` (it succeeded, never left the CPU, may fold by
// its place in the file) and a launch faster than its process and op's limit. A launch whose
// process or op has no limit yet has the limits read again, once per `reread`.
ingero::Status decide_foldable(Db& db, FoldLimits& lim, FoldRow& w, bool eligible, bool& reread);

// Calls inside another call of their thread keep their rows, both of them: spread over a run,
// the inner one would no longer be inside the outer. `rows` in start order.
void keep_nested(std::vector<FoldRow>& rows);

// The runs of the foldable rows of `rows` (in start order), each given to `fn` once closed: a
// kept call other than a launch closes every run of its process, a kept launch its thread's,
// a gap over kMaxRunGapNs or a change of stream, device, library, comm or cgroup the run's.
ingero::Status form_runs(const std::vector<FoldRow>& rows, const FoldLimits& lim,
                         const std::function<ingero::Status(const FoldRun&)>& fn);

// The statement that inserts a run into call_runs, and the insert of one. `with_first_id`: a
// run of calls that keep their rows a while (recent_blocks), whose first call's row id it
// records (first_call_id), so that readers of rows leave it out meanwhile.
ingero::Result<Stmt> prepare_run_insert(Db& db);
ingero::Status insert_run(Stmt& ins, const FoldRun& r, bool with_first_id);

}  // namespace ingero::store
