// MCP tool get_inflight (engine/stuck_now.h): what is stuck now on this node, from the tracer's
// `inflight` table, also while the tracer writes the file. Never cached: the answer changes
// with the clock while a call hangs.
#include <ctime>
#include <set>
#include <sstream>

#include "engine/hangs.h"
#include "engine/stuck_now.h"
#include "serve/mcp/tool_support.h"
#include "store/inflight_rows.h"

namespace ingero::serve::mcp {
namespace {

// A stuck thread's sentence, whole: cut at 64 characters as a name is, it lost how long, where
// and what the thread does ("... has been inside `ncclAllReduce` #3 for 15 s at ").
constexpr size_t kLineChars = 1000;

int64_t wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

// Over a fleet database: every node's threads stuck as their agents last recorded them (the
// latest version of each row), longest first, each with its node. The waits are as of each
// row's last observation: agents refresh a stuck thread's row every few seconds.
ToolOutput fleet_inflight(Opened& op, const ToolCall& call, std::optional<uint32_t> pid,
                          size_t limit) {
  engine::Window w;
  w.pid = pid;
  if (call.args.contains("node")) w.node = call.args["node"].get<std::string>();
  std::vector<engine::InflightRow> rows;
  for (auto& r : op.source->inflight(w))
    if (r.in.status == hal::Inflight::Status::kInFlight) rows.push_back(std::move(r));
  std::set<std::string> nodes;
  for (const auto& r : rows) nodes.insert(r.node);
  auto threads = engine::stuck_threads(*op.source, std::move(rows), false, wall_now());
  if (!op.error().empty()) return error_output("reading the fleet failed: " + op.error());
  ToolOutput o;
  std::ostringstream t;
  t << "over the fleet database " << as_data(op.fleet->title(), 200) << ": "
    << (threads.empty()
            ? std::string("nothing is stuck")
            : std::to_string(threads.size()) + " stuck thread" + (threads.size() == 1 ? "" : "s") +
                  " on " + std::to_string(nodes.size()) + " node" + (nodes.size() == 1 ? "" : "s") +
                  ", as last recorded")
    << "\n";
  Json stuck = Json::array();
  for (size_t i = 0; i < threads.size() && i < limit; ++i) {
    t << ident(threads[i].row.node) << ": " << as_data(threads[i].line, kLineChars) << "\n";
    Json j = engine::stuck_thread_json(threads[i]);
    j["node"] = threads[i].row.node;
    stuck.push_back(std::move(j));
  }
  o.structured = {{"tracer_running", false},
                  {"nodes", Json(std::vector<std::string>(nodes.begin(), nodes.end()))},
                  {"stuck", std::move(stuck)},
                  {"omitted", threads.size() > limit ? threads.size() - limit : 0}};
  o.text = t.str();
  return o;
}

ToolOutput get_inflight(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  std::optional<uint32_t> pid;
  if (call.args.contains("pid")) pid = call.args["pid"].get<uint32_t>();
  size_t limit = size_t(arg_int(call.args, "limit", 50));
  // A pid or node the trace does not hold is an error naming those it does, as `ingero status
  // --pid` and the other tools say it: it was answered "nothing is stuck". The pid is looked up
  // only where no row of it was read.
  if (call.args.contains("node"))
    if (std::string why =
            not_in_trace(*op->source, std::nullopt, call.args["node"].get<std::string>());
        !why.empty())
      return error_output(why);
  if (op->fleet) {
    if (std::string why = not_in_trace(*op->source, pid, std::nullopt); !why.empty())
      return error_output(why);
    return fleet_inflight(*op, call, pid, limit);
  }
  store::StringPool strings;
  auto read = store::read_stuck_now(op->reader->db(), ctx.db_path(), pid, strings);
  if (!read) return error_output("reading the trace failed: " + read.error().message);
  if (read->rows.empty())
    if (std::string why = not_in_trace(*op->source, pid, std::nullopt); !why.empty())
      return error_output(why);
  ToolOutput o;
  std::ostringstream t;
  Json stuck = Json::array();
  o.structured = {{"tracer_running", read->live}, {"stuck", stuck}, {"omitted", 0}};
  if (!read->session) {
    o.text = "the trace holds no session\n";
    return o;
  }
  const store::LatestSession& s = *read->session;
  o.structured["session_id"] = s.id;
  if (!s.node.empty()) o.structured["node"] = s.node;
  if (s.inflight_after_s > 0) o.structured["inflight_after_s"] = s.inflight_after_s;  // 0: off
  auto threads = engine::stuck_threads(*op->source, std::move(read->rows), read->live,
                                       store::session_now_ns(s));
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  if (read->live)
    t << "the tracer is running";
  else if (s.stopped_at)
    t << "the tracer stopped at " << format_wall(s.stopped_at) << "; stuck then";
  else
    t << "no tracer writes this trace and its last session did not stop; as last recorded";
  if (s.inflight_after_s == 0)
    t << " (it ran with --inflight-after 0s: calls in flight were not recorded)";
  else if (s.inflight_after_s > 0)
    t << " (calls in flight longer than "
      << engine::hang_duration(int64_t(s.inflight_after_s * 1e9)) << " are reported)";
  else
    t << " (recorded by a build that did not report calls in flight)";
  t << "\n";
  if (threads.empty())
    t << engine::nothing_stuck_line(read->live, s.inflight_after_s, s.launch_timing, s.started_at)
      << "\n";
  for (size_t i = 0; i < threads.size() && i < limit; ++i) {
    t << as_data(threads[i].line, kLineChars) << "\n";
    stuck.push_back(engine::stuck_thread_json(threads[i]));
  }
  o.structured["stuck"] = std::move(stuck);
  o.structured["omitted"] = threads.size() > limit ? threads.size() - limit : 0;
  o.text = t.str();
  return o;
}

}  // namespace

void add_inflight_tools(std::vector<Tool>& t) {
  t.push_back(
      {"get_inflight", "What is stuck now: GPU calls in flight and idle ranks",
       "The traced calls in flight on this node for longer than the tracer's --inflight-after "
       "(a sync, copy or collective that does not return), longest first: process, thread, "
       "call and its arguments, how long so far, the line it was called from and its stack, "
       "the thread's state (on-CPU, sleeping, in I/O) and what the process's other threads "
       "do; and each rank's thread that has made no GPU call for that long. Read while the "
       "tracer writes the trace; without a running tracer, what was stuck when it stopped. "
       "Over a fleet database (ingero mcp --source), every node's, each with its node, as its "
       "agent last recorded them." +
           kDataNote,
       object_schema({{"pid", pid_prop()},
                      {"node",
                       {{"type", "string"},
                        {"maxLength", 256},
                        {"description", "Over a fleet database: only this node"}}},
                      {"limit", limit_prop(50, 1000, "stuck threads")}}),
       out_schema({{"tracer_running", kBool},
                   {"session_id", kInt},
                   {"node", kStr},
                   {"nodes", kArr},
                   {"inflight_after_s", kNum},
                   {"stuck", kArr},
                   {"omitted", kInt}},
                  {"tracer_running", "stuck", "omitted"}),
       get_inflight, /*cacheable=*/false});
}

}  // namespace ingero::serve::mcp
