// Calls as the trace writer keeps them (schema 10): a block of up to kCallBlockRows calls, in
// the columns of a call row (store/column_block.h), and the block's folded form.
//
// A call goes from its decoded hal::Event into the block's columns once. The block is written
// to `call_store` when it fills, and at each commit while it fills (the tail), with every call
// (`full`); once full it is also folded (below) into the calls it keeps (`kept`) and its runs
// (`runs`). Readers of rows read `full` while it exists, the engine reads the folded form
// whatever the age (docs/schema.md).
//
// Folding is tiered retention's rule (store/tiers.h), decided here in memory: launches that say
// nothing on their own (succeeded or were not timed, never left the CPU, faster than their
// process and op's limit when timed, not inside another call of their thread) become runs:
// consecutive ones of a thread and op, on one stream, device, library, thread name and cgroup,
// at most kMaxRunGapNs apart, with no kept call of their thread between them (and no kept call
// other than a launch of their process). Runs never span two blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hal/event.h"
#include "hal/result.h"
#include "store/column_block.h"
#include "store/row_block.h"

namespace ingero::store {

inline constexpr size_t kCallBlockRows = 4096;

// The columns of a call row, in block order. Their names are those of the `events` columns
// (readers map a block's columns by name), plus the decoded fields (store/schema.h).
enum CallColumn : size_t {
  kCallId,
  kCallNode,
  kCallSession,
  kCallTs,   // wall clock, Unix ns
  kCallDur,  // NULL: not timed (an entry-only launch)
  kCallPid,
  kCallTid,
  kCallSource,
  kCallOp,
  kCallRet,     // NULL: never returned, or not timed
  kCallStatus,  // kStatus*
  kCallCgroup,
  kCallComm,
  kCallOffCpu,
  kCallPreempts,
  kCallSwitches,
  kCallPeerComm,
  kCallStack,
  kCallLibrary,
  kCallStackOfSite,
  kCallNested,
  kCallNestedSource,
  kCallNestedOp,
  kCallFirstField,  // then one column per hal::Field, in Field order
};
// `events.status` / the `status` of a call row.
inline constexpr int64_t kStatusComplete = 0;    // returned (ret_code says how)
inline constexpr int64_t kStatusUnfinished = 1;  // its thread exited inside it
inline constexpr int64_t kStatusUntimed = 2;     // seen at entry only: no duration, no return

// The column names of a call block, and of a block of runs (the columns of `call_runs`).
const std::vector<std::string>& call_column_names();
const std::vector<std::string>& run_column_names();

// The dictionary ids the writer gives an event's names.
struct CallIds {
  int source = 0, op = 0;
  int nested_source = 0, nested_op = 0;  // 0: no nested op
  int64_t library = 0;                   // 0: none
  bool launch = false;                   // the op is a launch (may fold)
};

// A launch op's fold limit in one process (ns); nullopt: none yet (its timed calls keep rows).
using FoldLimitFn = std::function<std::optional<int64_t>(uint32_t pid, int source, int op)>;

struct FoldedCalls {
  // The rows kept, copied only when some call folded: a block folding leaves whole is its own
  // folded form, and `kept` stays empty (the writer stores the full block alone).
  ColumnBlock kept{call_column_names()};
  ColumnBlock runs{run_column_names()};
  uint64_t folded = 0;     // calls in the runs
  uint64_t kept_rows = 0;  // calls that keep their rows, whether copied to `kept` or not
};

class CallBlock {
 public:
  CallBlock() : cols_(call_column_names()) {}

  // Appends a call: its id, wall-clock start, the event and its ids.
  void add(int64_t id, int64_t ts_ns, const hal::Event& ev, const CallIds& ids,
           std::string_view node, int64_t session);

  // Appends every call of a decoded block of calls (`full`, as written), matching its columns
  // by name; `launch(source, op)` says which ops are launches. An Error where a row lacks an
  // id, a timestamp, a pid or an op.
  ingero::Status add_decoded(const RowBlock& rows,
                             const std::function<bool(int source, int op)>& launch);

  size_t size() const { return meta_.size(); }
  bool empty() const { return meta_.empty(); }
  const ColumnBlock& columns() const { return cols_; }
  int64_t first_id() const { return first_id_; }
  int64_t last_id() const { return last_id_; }
  int64_t first_ts() const { return first_ts_; }
  int64_t last_ts() const { return last_ts_; }
  int64_t end_ts() const { return end_ts_; }  // the greatest start + duration
  uint64_t untimed() const { return untimed_; }

  // Folds the block (its rows as they are now) by `limit`: the calls kept, the runs.
  // `enabled` false, or no call that may fold (no launch, or none on CPU and fast enough):
  // every call is kept, and nothing is copied (the block is its own folded form).
  void fold(const FoldLimitFn& limit, FoldedCalls& out, bool enabled = true) const;
  void clear();
  // Keeps the first `rows` calls (a batch that failed to commit takes its calls back).
  void truncate(size_t rows);

 private:
  // What folding looks at, row by row.
  struct Meta {
    int64_t id = 0, ts = 0, dur = 0;  // dur 0 when not timed
    uint32_t pid = 0, tid = 0;
    int source = 0, op = 0;
    bool launch = false, timed = true, ok = false, on_cpu = true;
    // What a run's calls share: absent values are -1 (pointers and ids are never -1).
    int64_t stream = -1, device = -1, library = -1, cgroup = 0;
    int64_t func = -1;  // a launch's function: a run of one kernel keeps it
    uint32_t comm = 0;  // an index into the block's thread names
    uint32_t nested = 0;
    bool same_run(const Meta& o) const {
      return stream == o.stream && device == o.device && library == o.library && comm == o.comm &&
             cgroup == o.cgroup;
    }
  };
  void note(const Meta& m);
  struct Run;
  void write_run(const Run& r, std::string_view funcs, ColumnBlock& out) const;
  std::vector<std::string> kernels_of_runs(const std::vector<Run>& done,
                                           const std::vector<uint32_t>& run_of,
                                           uint32_t runs) const;
  ColumnBlock cols_;
  std::vector<Meta> meta_;
  std::vector<std::string> comms_;  // thread names, by Meta::comm
  int64_t first_id_ = 0, last_id_ = 0, first_ts_ = 0, last_ts_ = 0, end_ts_ = 0;
  uint64_t untimed_ = 0;
};

}  // namespace ingero::store
