// The mean duration of the timed calls of one op in one process of one node, and of that op on
// the node where the process timed none: what a call seen at entry only is taken to have
// taken, by the file's reader (store/untimed_durations.h) and the fleet's
// (fleet/untimed_means.h) alike. `Op` names an op the way its reader does (the file's source
// and op ids, the fleet's vendor, api and op); lookups may use views of its strings.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace ingero::store {

template <class Op>
class ProcessMeans {
 public:
  // Adds `calls` timed calls that took `sum_ns` in all.
  void add(std::string node, uint32_t pid, const Op& op, uint64_t sum_ns, uint64_t calls) {
    auto& o = by_op_[{node, op}];
    o.first += sum_ns;
    o.second += calls;
    auto& p = by_process_[{std::move(node), pid, op}];
    p.first += sum_ns;
    p.second += calls;
  }
  // 0 where neither the process nor its node timed a call of the op.
  template <class OpView>
  uint64_t of(std::string_view node, uint32_t pid, const OpView& op) const {
    if (auto it = by_process_.find(std::make_tuple(node, pid, op));
        it != by_process_.end() && it->second.second)
      return it->second.first / it->second.second;
    if (auto it = by_op_.find(std::make_tuple(node, op)); it != by_op_.end() && it->second.second)
      return it->second.first / it->second.second;
    return 0;
  }

 private:
  using Totals = std::pair<uint64_t, uint64_t>;  // (sum of the durations, timed calls)
  std::map<std::tuple<std::string, uint32_t, Op>, Totals, std::less<>> by_process_;
  std::map<std::tuple<std::string, Op>, Totals, std::less<>> by_op_;
};

}  // namespace ingero::store
