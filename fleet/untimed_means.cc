#include "fleet/untimed_means.h"

namespace ingero::fleet {

std::string UntimedMeans::sql(const std::string& events_table, const std::string& where) {
  // status 0: a call that returned (ok or failed); 1 unfinished, 2 seen at entry only.
  return "SELECT node, pid, vendor, api, op, sum(dur_ns), count() FROM " + events_table + where +
         " AND vendor != 'host' AND status = 0 GROUP BY node, pid, vendor, api, op";
}

void UntimedMeans::add(const std::vector<TsvField>& f) {
  const uint64_t sum = std::stoull(f[5].text), n = std::stoull(f[6].text);
  by_process_[{f[0].text, uint32_t(std::stoul(f[1].text)), f[2].text, f[3].text, f[4].text}] = {sum,
                                                                                                n};
  auto& o = by_op_[{f[0].text, f[2].text, f[3].text, f[4].text}];
  o.first += sum;
  o.second += n;
}

uint64_t UntimedMeans::of(std::string_view node, uint32_t pid, std::string_view vendor,
                          std::string_view api, std::string_view op) const {
  auto mean = [](const std::pair<uint64_t, uint64_t>& t) {
    return t.second ? t.first / t.second : 0;
  };
  if (auto it = by_process_.find(std::make_tuple(node, pid, vendor, api, op));
      it != by_process_.end())
    return mean(it->second);
  if (auto it = by_op_.find(std::make_tuple(node, vendor, api, op)); it != by_op_.end())
    return mean(it->second);
  return 0;
}

}  // namespace ingero::fleet
