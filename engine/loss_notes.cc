#include "engine/loss_notes.h"

#include "engine/chain.h"
#include "engine/host_context.h"

namespace ingero::engine {

std::vector<LossNote> loss_notes(const TraceLosses& l) {
  std::vector<LossNote> out;
  if (uint64_t calls = l.calls_lost()) {
    std::vector<std::string> why;
    uint64_t dropped = l.by_kind ? l.call_drops : l.ringbuf_drops;
    if (dropped)
      why.push_back(format_count(dropped) +
                    (l.by_kind ? " ring buffer full" : " records dropped, kind unknown"));
    if (l.lost_calls) why.push_back(format_count(l.lost_calls) + " untraced");
    if (l.calls_lost_at_exit)
      why.push_back(format_count(l.calls_lost_at_exit) + " unread when the tracer stopped");
    std::string joined;
    for (const auto& w : why) joined += (joined.empty() ? "" : ", ") + w;
    out.push_back({true, format_count(calls) + (calls == 1 ? " call" : " calls") + " lost (" +
                             joined + "): figures are lower bounds"});
  }
  if (l.by_kind) {
    if (l.stack_drops) out.push_back({false, format_count(l.stack_drops) + " stack records lost"});
    if (l.host_drops) out.push_back({true, format_count(l.host_drops) + " host events lost"});
    if (l.sample_drops) out.push_back({false, format_count(l.sample_drops) + " CPU samples lost"});
  }
  if (l.store_errors)
    out.push_back({true, format_count(l.store_errors) + " events not written (store errors)"});
  if (l.retention_before_ns) {
    std::string what = "the events";
    if (l.retention_calls || l.retention_events)
      what = format_count(l.retention_calls) + " calls and " + format_count(l.retention_events) +
             " host events";
    out.push_back(
        {false, what + (l.retention_from_ns ? " from " + format_wall(l.retention_from_ns) : "") +
                    " to " + format_wall(l.retention_before_ns) +
                    " were deleted by retention (--retain/--max-db-size): the trace "
                    "holds nothing of that time"});
  }
  for (const auto& late : l.late_libraries) {
    auto slash = late.path.rfind('/');
    std::string name = slash == std::string::npos ? late.path : late.path.substr(slash + 1);
    out.push_back({true, name + " attached " +
                             (late.late_ns > 0 ? format_duration(uint64_t(late.late_ns)) + " after"
                                               : "some time after") +
                             " pid " + std::to_string(late.pid) +
                             " loaded it: its calls into it before then are not traced"});
  }
  return out;
}

std::string losses_line(const std::optional<TraceLosses>& l) {
  if (!l) return "";
  std::string out;
  for (const auto& n : loss_notes(*l)) out += (out.empty() ? "" : "; ") + n.text;
  return out;
}

// Off-CPU intervals past the cap: which were kept, and how many were not.
std::string offcpu_kept_line(const HostContext& h) {
  const int64_t from = h.offcpu_kept_from_ns, until = h.offcpu_kept_until_ns;
  const std::string cap = format_count(kMaxOffCpuIntervals);
  std::string which, others;
  if (from && until) {
    which = "(" + cap + ")", others = "others";
  } else if (from) {
    which = "(the last " + cap + ")", others = "earlier ones";
  } else {
    which = "(the first " + cap + ")", others = "later ones";
  }
  std::string s = "off-CPU intervals of GPU threads kept ";
  if (from) s += "from " + format_wall(from) + " ";
  if (until) s += "until " + format_wall(until) + " ";
  return s + "only " + which + ": " + format_count(h.offcpu_dropped) + " " + others +
         " are counted among the host events but not attributed to steps, tails or contention "
         "(explain " +
         (until ? "--from" : "--to") + " covers them)";
}

}  // namespace ingero::engine
