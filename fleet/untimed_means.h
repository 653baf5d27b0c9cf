// What a call seen at entry only took, as the fleet's reader gives it to the engine: the mean of
// the timed calls of its node, process and op in the rows read (of its op on its node where its
// process timed none), as the file's reader gives it from the file's summaries
// (store/untimed_durations.h). ClickHouse holds such a call's duration as 0 (`events.dur_ns`
// is UInt64; the `calls` view gives NULL): read as 0, a fleet's launches cost nothing in its
// API time and op figures.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fleet/tsv.h"
#include "store/process_means.h"

namespace ingero::fleet {

class UntimedMeans {
 public:
  // The SELECT (without FORMAT) whose rows add() takes: the timed calls' totals of each node,
  // process and op among the `events` rows of `where` (" WHERE ...", over the table's columns).
  static std::string sql(const std::string& events_table, const std::string& where);
  static constexpr size_t kColumns = 7;
  void add(const std::vector<TsvField>& row);

  // 0 where neither its process nor its node timed a call of that op.
  uint64_t of(std::string_view node, uint32_t pid, std::string_view vendor, std::string_view api,
              std::string_view op) const {
    return means_.of(node, pid, std::make_tuple(vendor, api, op));
  }

 private:
  store::ProcessMeans<std::tuple<std::string, std::string, std::string>> means_;  // vendor/api/op
};

}  // namespace ingero::fleet
