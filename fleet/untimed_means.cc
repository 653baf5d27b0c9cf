#include "fleet/untimed_means.h"

namespace ingero::fleet {

std::string UntimedMeans::sql(const std::string& events_table, const std::string& where) {
  // status 0: a call that returned (ok or failed); 1 unfinished, 2 seen at entry only.
  return "SELECT node, pid, vendor, api, op, sum(dur_ns), count() FROM " + events_table + where +
         " AND vendor != 'host' AND status = 0 GROUP BY node, pid, vendor, api, op";
}

void UntimedMeans::add(const std::vector<TsvField>& f) {
  means_.add(f[0].text, uint32_t(std::stoul(f[1].text)),
             std::make_tuple(f[2].text, f[3].text, f[4].text), std::stoull(f[5].text),
             std::stoull(f[6].text));
}

}  // namespace ingero::fleet
