#include "engine/stuck_now.h"

#include <algorithm>

#include "engine/chain.h"
#include "engine/hangs.h"

namespace ingero::engine {

std::vector<StuckThread> stuck_threads(TraceSource& source, std::vector<InflightRow> rows,
                                       bool live, int64_t now_ns) {
  auto procs = source.processes();
  std::vector<StuckThread> out;
  out.reserve(rows.size());
  for (auto& r : rows) {
    StuckThread t;
    const hal::Inflight& in = r.in;
    auto p = procs.find(in.call.pid);
    t.process = p != procs.end() && !p->second.name.empty() ? p->second.name
                                                            : std::string(in.call.comm_view());
    if (in.stack_id) t.stack = source.stack(in.stack_id);
    t.where = stack_location(t.stack);
    t.waited_ns = int64_t(in.call.dur_ns);
    if (live && in.status == hal::Inflight::Status::kInFlight && now_ns > int64_t(in.call.ts_ns))
      t.waited_ns = now_ns - int64_t(in.call.ts_ns);
    t.row = std::move(r);
    t.line = hang_line(t.row, t.process, t.stack, t.waited_ns);
    out.push_back(std::move(t));
  }
  std::stable_sort(out.begin(), out.end(), [](const StuckThread& a, const StuckThread& b) {
    return a.waited_ns > b.waited_ns;
  });
  return out;
}

nlohmann::json stuck_thread_json(const StuckThread& t) {
  const hal::Inflight& in = t.row.in;
  const hal::Event& e = in.call;
  nlohmann::json j = {
      {"what", std::string(hal::inflight_what_name(in.what))},
      {"status", std::string(hal::inflight_status_name(in.status))},
      {"pid", e.pid},
      {"tid", e.tid},
      {"process", t.process},
      {"comm", std::string(e.comm_view())},
      {"vendor", std::string(e.vendor)},
      {"api", std::string(e.api)},
      {"op", std::string(e.op)},
      {"entered_at", format_wall(int64_t(e.ts_ns))},
      {"entered_ns", e.ts_ns},
      {"waited_s", double(t.waited_ns) / 1e9},
      {"seen_at", format_wall(int64_t(in.seen_ns))},
      {"state", std::string(hal::thread_state_name(in.state))},
      {"others_running", in.others_running},
      {"others_sleeping", in.others_sleeping},
      {"others_io", in.others_io},
      {"where", t.where},
      {"stack_id", in.stack_id},
      {"line", t.line},
  };
  if (!t.row.node.empty()) j["node"] = t.row.node;
  if (in.what == hal::Inflight::What::kCall) j["kind"] = std::string(hal::kind_name(e.kind));
  if (in.seq != hal::kNoSeq) j["seq"] = in.seq;
  if (in.ended_ns) j["ended_at"] = format_wall(int64_t(in.ended_ns));
  nlohmann::json args = nlohmann::json::object();
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (auto v = e.get(hal::Field(i))) args[std::string(hal::field_name(hal::Field(i)))] = *v;
  j["args"] = std::move(args);
  nlohmann::json frames = nlohmann::json::array();
  for (const auto& f : t.stack) {
    nlohmann::json fj = {{"function", f.function}, {"python", f.python}};
    if (!f.file.empty()) {
      fj["file"] = f.file;
      fj["line"] = f.line;
    }
    if (!f.module.empty()) fj["module"] = f.module;
    if (!f.address.empty()) fj["address"] = f.address;
    frames.push_back(std::move(fj));
  }
  j["stack"] = std::move(frames);
  return j;
}

std::string nothing_stuck_line(bool live, double inflight_after_s, int launch_timing,
                               int64_t started_ns) {
  if (inflight_after_s <= 0)
    return std::string("whether anything ") + (live ? "is" : "was") +
           " stuck is unknown: calls in flight were not recorded";
  std::string line =
      live ? "nothing is stuck: no traced call is in flight for that long" : "nothing was stuck";
  if (launch_timing > 1)
    line += " (kernel launches are watched only when timed, 1 in " + std::to_string(launch_timing) +
            " per thread, or without uprobe sessions those in timing windows: a thread stuck "
            "inside another would not show; --launch-timing 1 watches every one)";
  if (started_ns > 0)
    line += "; a call entered before the tracer started (" + format_wall(started_ns) +
            ") is not seen: a hang that began before it does not show";
  return line;
}

}  // namespace ingero::engine
