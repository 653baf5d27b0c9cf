// What is stuck now, as `ingero status` and the MCP get_inflight tool tell it: the tracer's
// in-flight rows (TraceSource::inflight, hal/inflight.h) with the process's name, the stack
// and the line it waits at, and how long it has waited.
//
// While the tracer runs (`live`), a row still in flight has waited from its entry until now:
// the tracer rewrites rows only when they change, so the row's own duration may lag by up to
// its refresh period. Otherwise a row's duration is the one recorded.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::engine {

struct StuckThread {
  InflightRow row;
  std::string process;                // its name as the trace knows it, else the thread's comm
  std::vector<StackFrameInfo> stack;  // innermost first
  std::string where;                  // engine::stack_location(stack): "train.py:88 (step)"
  int64_t waited_ns = 0;
  std::string line;  // engine::hang_line
};

// The rows as people read them, longest wait first. `now_ns`: now on the clock the rows are
// stamped with (store::session_now_ns), used when `live`.
std::vector<StuckThread> stuck_threads(TraceSource& source, std::vector<InflightRow> rows,
                                       bool live, int64_t now_ns);

nlohmann::json stuck_thread_json(const StuckThread& t);

// What is said when no thread is found stuck: that none is (`live`) or was, where the tracer
// recorded calls in flight (`inflight_after_s` > 0), else that it is unknown (0: it ran with
// --inflight-after 0s; < 0: a build that did not record them).
// `launch_timing` (1 in N launches timed; 0: unknown): a launch seen at entry only is never in
// flight, so with N > 1 the line says that a thread stuck inside one would not show.
// `started_ns` (the session's start; 0: unknown): a uprobe sees a call from its entry, so a
// call entered before the tracer attached, a hang that began before the trace, is not seen:
// the line says since when it speaks.
std::string nothing_stuck_line(bool live, double inflight_after_s, int launch_timing = 0,
                               int64_t started_ns = 0);

}  // namespace ingero::engine
