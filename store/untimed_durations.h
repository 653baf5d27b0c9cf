// What a call seen at entry only took, as the engine's time accounting reads it: launches are
// traced entry-only (one trap each) and one in N per thread is timed through its return
// (docs/architecture.md). An untimed call reads back with the mean duration of the timed calls
// of its process and op (of its op in any process of its node where its process timed none),
// from the per-second summaries, and stays marked untimed (hal::Event::timed): latency
// quantiles, minima and maxima come from timed calls only (the summaries' sketches hold only
// those). A merged file's nodes are apart: another machine's launches (and its processes of the
// same pid) say nothing of these.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "hal/result.h"
#include "store/process_means.h"
#include "store/sqlite_db.h"

namespace ingero::store {

class UntimedDurations {
 public:
  // Reads the means from the file's summaries (none when it has no untimed calls: `any()` is
  // false, and of() says 0).
  static ingero::Result<UntimedDurations> load(Db& db);
  bool any() const { return any_; }
  uint64_t of(std::string_view node, uint32_t pid, int source, int op) const {
    return means_.of(node, pid, std::pair(source, op));
  }

 private:
  bool any_ = false;
  ProcessMeans<std::pair<int, int>> means_;  // by (source, op)
};

}  // namespace ingero::store
