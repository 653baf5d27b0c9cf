#include "store/untimed_durations.h"

#include "store/call_store.h"

namespace ingero::store {

ingero::Result<UntimedDurations> UntimedDurations::load(Db& db) {
  UntimedDurations u;
  if (!has_call_store(db)) return u;
  auto n = db.kept_int("SELECT count(*) FROM call_store WHERE untimed > 0");
  if (!n) return n.error();
  if (n->value_or(0) == 0) return u;
  u.any_ = true;
  auto st = db.prepare(
      "SELECT pid, source, op, sum(sum_ns), sum(timed) FROM call_seconds GROUP BY pid, source, op");
  if (!st) return st.error();
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> op_totals;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    int source = int(st->int64(1)), op = int(st->int64(2));
    uint64_t sum = uint64_t(st->int64(3)), timed = uint64_t(st->int64(4));
    if (!timed) continue;
    u.by_process_[{uint32_t(st->int64(0)), source, op}] = sum / timed;
    auto& t = op_totals[{source, op}];
    t.first += sum;
    t.second += timed;
  }
  for (const auto& [k, t] : op_totals) u.by_op_[k] = t.first / t.second;
  return u;
}

uint64_t UntimedDurations::of(uint32_t pid, int source, int op) const {
  if (auto it = by_process_.find({pid, source, op}); it != by_process_.end()) return it->second;
  if (auto it = by_op_.find({source, op}); it != by_op_.end()) return it->second;
  return 0;
}

}  // namespace ingero::store
