// The one mapping from a row of the contract views `calls` and `host_events` to hal::Event (the
// writer's mapping, the other way, is TraceWriter::add). A trace file's views
// (store/contract_views.h) and the ClickHouse database's (fleet/ch_schema.h) have the same
// columns, so the file's reader (store/event_rows.h, through the views) and the ClickHouse
// source (fleet/clickhouse_source.h) both decode rows here: a column added to the views is
// decoded in one place.
//
// Columns are matched by name: views of different builds and of the original implementation's
// files differ in which optional columns exist, never in meaning; a missing one reads as unset.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hal/event.h"

namespace ingero::store {

// Storage for the strings events point at (vendor, api, op): an Event's string_views stay
// valid as long as the pool.
class StringPool {
 public:
  // Found before it is added: a string met again (a run's kernel counts, ~1.5 KB) costs a
  // look-up, not a copy into a new node that is then thrown away.
  std::string_view intern(std::string_view s) {
    if (auto it = strings_.find(s); it != strings_.end()) return *it;
    return *strings_.emplace(s).first;
  }

 private:
  std::set<std::string, std::less<>> strings_;
};

enum class EventRows { kCalls, kHostEvents };

// A memcpy direction as the views spell it ("H2D") to its Field value; 4 (default) if unknown.
uint64_t direction_code(std::string_view s);

class EventColumns {
 public:
  static constexpr int kNone = -1;
  // Every view column the mapping reads, in a fixed order (a SELECT that lists them: ClickHouse
  // answers have no header).
  static const std::vector<std::string>& names(EventRows rows);
  // `index_of`: the column of a statement by name, kNone when the view lacks it.
  EventColumns(EventRows rows, const std::function<int(std::string_view)>& index_of);
  EventColumns() = default;
  // The view has what an event needs: its time and op.
  bool complete() const { return ts_ != kNone && op_ != kNone; }

  // Decodes the current row of `row` (is_null(int), int64(int), text_view(int)) into `e`,
  // reset first. vendor, api and op point into `strings`.
  template <class Row>
  void read(const Row& row, hal::Event& e, StringPool& strings) const;

 private:
  EventRows rows_ = EventRows::kCalls;
  int ts_ = kNone, dur_ = kNone, pid_ = kNone, tid_ = kNone, comm_ = kNone, cgroup_ = kNone;
  int vendor_ = kNone, api_ = kNone, kind_ = kNone, op_ = kNone, ret_ = kNone, status_ = kNone;
  int off_cpu_ = kNone, preempts_ = kNone, switches_ = kNone, preemptor_pid_ = kNone;
  int peer_comm_ = kNone, direction_ = kNone, stack_ = kNone, detail_ = kNone, saddr_ = kNone;
  int daddr_ = kNone;
  std::array<int, hal::kFieldCount> fields_{};
};

template <class Row>
void EventColumns::read(const Row& row, hal::Event& e, StringPool& strings) const {
  auto has = [&](int c) { return c != kNone && !row.is_null(c); };
  auto u64 = [&](int c) { return has(c) ? uint64_t(row.int64(c)) : uint64_t(0); };
  e = hal::Event{};
  e.ts_ns = u64(ts_);
  e.dur_ns = has(dur_) && row.int64(dur_) > 0 ? uint64_t(row.int64(dur_)) : 0;  // < 0: none
  e.pid = uint32_t(u64(pid_));
  e.tid = uint32_t(u64(tid_));
  if (has(comm_)) e.set_comm(row.text_view(comm_));
  e.cgroup_id = u64(cgroup_);
  e.stack_id = u64(stack_);
  e.op = strings.intern(has(op_) ? row.text_view(op_) : std::string_view());
  if (has(kind_))
    e.kind = hal::kind_from_name(row.text_view(kind_)).value_or(hal::EventKind::kUnknown);
  if (has(peer_comm_)) e.set_peer_comm(row.text_view(peer_comm_));
  if (has(ret_)) {
    e.has_ret = true;
    e.ret = row.int64(ret_);
  }
  if (rows_ == EventRows::kCalls) {
    e.vendor = strings.intern(has(vendor_) ? row.text_view(vendor_) : std::string_view());
    e.api = strings.intern(has(api_) ? row.text_view(api_) : std::string_view());
    e.unfinished = has(status_) && row.text_view(status_) == "unfinished";
    // A call without a duration is not timed, whatever its status (a legacy file's failed call
    // whose duration is damaged, store/legacy_views.h): its 0 is no latency.
    e.timed = (!has(status_) || row.text_view(status_) != "untimed") &&
              (dur_ == kNone || (has(dur_) && row.int64(dur_) >= 0));
    e.off_cpu_ns = u64(off_cpu_);
    e.preempts = uint32_t(u64(preempts_));
    e.switches = uint32_t(u64(switches_));
    if (has(preemptor_pid_)) e.set(hal::Field::kPeerPid, u64(preemptor_pid_));
    if (has(direction_)) e.set(hal::Field::kDirection, direction_code(row.text_view(direction_)));
  } else {
    e.vendor = strings.intern("host");
    e.api = strings.intern("kernel");
    if (has(detail_)) e.detail = std::string(row.text_view(detail_));
    if (has(saddr_)) e.saddr = std::string(row.text_view(saddr_));
    if (has(daddr_)) e.daddr = std::string(row.text_view(daddr_));
  }
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (has(fields_[i])) e.set(static_cast<hal::Field>(i), u64(fields_[i]));
}

}  // namespace ingero::store
