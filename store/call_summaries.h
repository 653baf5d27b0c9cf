// Per-second call summaries (the `call_seconds` table): for every (node, session, second, pid,
// tid, op), the count, errors, sums, extremes and a latency sketch (engine/quantile_sketch.h)
// of the calls that started in that second. The writer keeps them as the trace grows, so a
// question about counts, rates or latency quantiles over a long trace reads a few rows per
// second instead of every call, and the summaries outlive the calls that tiered retention
// folds (store/tiers.h).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/quantile_sketch.h"
#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct SummarizedCall {
  int64_t ts_ns = 0;  // wall clock, unix epoch ns
  uint64_t dur_ns = 0;
  uint32_t pid = 0, tid = 0;
  int source = 0, op = 0;
  bool error = false, unfinished = false;
  bool timed = true;  // false: seen at entry only; its duration is not known
  uint64_t off_cpu_ns = 0, preempts = 0, bytes = 0;
};

// A second is summarised once calls 2 s later have come: events reach the writer nearly in
// time order.
inline constexpr int64_t kSummaryLagNs = 2000000000;

class CallSummarizer {
 public:
  void add(std::string_view node, int64_t session_id, const SummarizedCall& c);
  // Inserts the seconds that started before `before_ns` (every second: INT64_MAX) on `db`,
  // inside the caller's transaction, and forgets them. A call arriving later for a second
  // already written starts a second row for it: readers sum and merge over rows.
  ingero::Status flush(Db& db, int64_t before_ns);
  // The end of the transaction `flush` wrote in: committed() forgets the seconds written;
  // rolled_back() takes them back (a COMMIT that failed on a full disk), and the next flush
  // writes them again.
  void committed() { written_.clear(); }
  void rolled_back();
  // The newest call start added so far (0 before the first).
  int64_t newest_ns() const { return newest_ns_; }
  size_t open_seconds() const { return open_.size(); }

 private:
  struct Key {
    int64_t second = 0;  // first: flushing goes in time order
    size_t node = 0;     // index into nodes_ (no string copy per call)
    int64_t session_id = 0;
    uint32_t pid = 0, tid = 0;
    int source = 0, op = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Acc {
    uint64_t calls = 0, timed = 0;
    uint64_t errors = 0, unfinished = 0, sum_ns = 0, min_ns = UINT64_MAX, max_ns = 0;
    uint64_t off_cpu_ns = 0, preempts = 0, bytes = 0;
    engine::QuantileSketch sketch;
  };
  static void merge(Acc& into, const Acc& a);
  size_t node_index(std::string_view node);
  Acc& find(const Key& k);
  std::map<Key, Acc> open_;
  std::map<Key, Acc> written_;  // flushed in the transaction still open
  // The accumulators of the keys seen last, by a hash of the key: a call is nearly always of a
  // (second, thread, op) seen a few calls before, and the map's lookup is most of the cost.
  // Cleared when seconds are flushed (their accumulators go).
  static constexpr size_t kRecent = 64;
  struct Slot {
    Key key;
    Acc* acc = nullptr;
  };
  std::array<Slot, kRecent> recent_;
  std::vector<std::string> nodes_;
  int64_t newest_ns_ = 0;
};

}  // namespace ingero::store
