#include "store/event_columns.h"

#include <map>

#include "store/schema.h"

namespace ingero::store {

uint64_t direction_code(std::string_view s) {
  static const std::map<std::string_view, uint64_t> kDir = {
      {"H2H", 0}, {"H2D", 1}, {"D2H", 2}, {"D2D", 3}, {"default", 4}, {"peer", 5}};
  auto it = kDir.find(s);
  return it == kDir.end() ? 4 : it->second;
}

namespace {

// The view columns of the fixed event members (the decoded fields follow, by their names).
const char* const kCallColumns[] = {"ts_ns",          "dur_ns",    "pid",       "tid",
                                    "comm",           "cgroup_id", "vendor",    "api",
                                    "kind",           "op",        "ret",       "status",
                                    "off_cpu_ns",     "preempts",  "switches",  "preemptor_pid",
                                    "preemptor_comm", "direction", "stack_hash"};
const char* const kHostColumns[] = {"ts_ns",     "dur_ns", "pid",   "tid",  "comm",
                                    "cgroup_id", "kind",   "event", "code", "peer_comm",
                                    "detail",    "saddr",  "daddr"};

}  // namespace

const std::vector<std::string>& EventColumns::names(EventRows rows) {
  auto make = [](auto& fixed) {
    std::vector<std::string> v(std::begin(fixed), std::end(fixed));
    for (const std::string& f : field_columns())
      if (f != "direction") v.push_back(f);  // the calls view spells it out (direction above)
    return v;
  };
  static const std::vector<std::string> calls = make(kCallColumns), host = make(kHostColumns);
  return rows == EventRows::kCalls ? calls : host;
}

EventColumns::EventColumns(EventRows rows, const std::function<int(std::string_view)>& col)
    : rows_(rows) {
  fields_.fill(kNone);
  ts_ = col("ts_ns");
  dur_ = col("dur_ns");
  pid_ = col("pid");
  tid_ = col("tid");
  comm_ = col("comm");
  cgroup_ = col("cgroup_id");
  kind_ = col("kind");
  stack_ = col("stack_hash");  // a call's, an on-CPU sample's
  if (rows == EventRows::kCalls) {
    vendor_ = col("vendor");
    api_ = col("api");
    op_ = col("op");
    ret_ = col("ret");
    status_ = col("status");
    off_cpu_ = col("off_cpu_ns");
    preempts_ = col("preempts");
    switches_ = col("switches");
    preemptor_pid_ = col("preemptor_pid");
    peer_comm_ = col("preemptor_comm");
    direction_ = col("direction");
  } else {
    op_ = col("event");
    ret_ = col("code");
    peer_comm_ = col("peer_comm");
    detail_ = col("detail");
    saddr_ = col("saddr");
    daddr_ = col("daddr");
  }
  const auto& names = field_columns();
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (names[i] != "direction") fields_[i] = col(names[i]);
}

}  // namespace ingero::store
