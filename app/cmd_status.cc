// `ingero status`: what is stuck now, read from a trace file while its tracer writes it (the
// tracer's `inflight` table, capture/inflight_monitor.h): each traced call in flight for longer
// than the tracer's --inflight-after, with its process, op, seconds and the line it was called
// from, and each rank's thread that has made no GPU call for that long.
#include <sys/stat.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/terminal_text.h"
#include "app/window_flags.h"
#include "engine/chain.h"
#include "engine/hangs.h"
#include "engine/json_text.h"
#include "engine/node_selection.h"
#include "engine/stuck_now.h"
#include "store/inflight_rows.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"

namespace ingero::app {
namespace {

struct Opts {
  std::string db;
  std::optional<uint32_t> pid;
  bool json = false;
};

std::string args_text(const hal::Event& e) {
  std::string s;
  for (size_t i = 0; i < hal::kFieldCount; ++i) {
    auto v = e.get(hal::Field(i));
    if (!v) continue;
    char b[32];
    std::snprintf(b, sizeof(b), "%#llx", (unsigned long long)*v);
    s += (s.empty() ? "" : " ") + std::string(hal::field_name(hal::Field(i))) + "=" + b;
  }
  return s;
}

std::string frame_text(const engine::StackFrameInfo& f) {
  std::string s = f.function.empty() ? (f.address.empty() ? "?" : f.address) : f.function;
  if (!f.file.empty()) s += " at " + f.file + ":" + std::to_string(f.line);
  if (!f.python && !f.module.empty() && f.file.empty()) s += " (" + f.module + ")";
  return s;
}

int run_status(const Opts& o) {
  std::string path = o.db.empty() ? default_db_path() : o.db;
  auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
  if (!reader) {
    std::cerr << "ingero status: " << reader.error().message << "\n";
    return kExitFailure;
  }
  store::StringPool strings;
  auto read = store::read_stuck_now((*reader)->db(), path, o.pid, strings);
  if (!read) {
    std::cerr << "ingero status: " << read.error().message << "\n";
    return kExitFailure;
  }
  if (!read->session) {
    std::cerr << "ingero status: " << path << " holds no trace session\n";
    return kExitFailure;
  }
  const store::LatestSession& s = *read->session;
  store::SqlTraceSource source(**reader);
  // A pid the trace does not know was answered "nothing is stuck", as if it had been watched.
  if (o.pid)
    if (auto st = engine::check_pid(source.processes(), *o.pid); !st) {
      std::cerr << "ingero status: " << st.error().message;
      if (s.started_at > 0)
        std::cerr << "; a call entered before the tracer started ("
                  << engine::format_wall(s.started_at) << ") is not seen";
      std::cerr << "\n";
      return kExitUsage;
    }
  int64_t at = store::session_now_ns(s);
  bool live = read->live;
  auto stuck = engine::stuck_threads(source, std::move(read->rows), live, at);
  std::string after = s.inflight_after_s < 0 ? ""
                      : s.inflight_after_s == 0
                          ? "off"
                          : engine::hang_duration(int64_t(s.inflight_after_s * 1e9));
  if (o.json) {
    nlohmann::json j = {{"trace", path},
                        {"tracer_running", live},
                        {"session_id", s.id},
                        {"stuck", nlohmann::json::array()}};
    if (!s.node.empty()) j["node"] = s.node;
    if (s.stopped_at) j["stopped_at"] = engine::format_wall(s.stopped_at);
    if (s.inflight_after_s > 0) j["inflight_after_s"] = s.inflight_after_s;  // 0: off
    for (const auto& t : stuck) j["stuck"].push_back(engine::stuck_thread_json(t));
    std::cout << engine::json_text(j, 2) << "\n";
    return kExitOk;
  }
  TerminalText out(std::cout);  // traced names may hold escape sequences
  out << path;
  if (live)
    out << ": being traced now";
  else if (s.stopped_at)
    out << ": the tracer stopped at " << engine::format_wall(s.stopped_at)
        << "; what was stuck then";
  else
    out << ": not being traced (its tracer ended without stopping); what it last recorded";
  if (after == "off")
    out << " (--inflight-after 0s: calls in flight were not recorded)";
  else if (!after.empty())
    out << " (calls in flight longer than " << after << " are reported)";
  else
    out << " (recorded by a build that did not report calls in flight)";
  out << "\n";
  if (stuck.empty()) {
    out << engine::nothing_stuck_line(live, s.inflight_after_s, s.launch_timing, s.started_at)
        << "\n";
    return kExitOk;
  }
  for (const auto& t : stuck) {
    out << t.line << "\n";
    if (std::string a = args_text(t.row.in.call); !a.empty()) out << "    args: " << a << "\n";
    size_t shown = 0;
    for (const auto& fr : t.stack) {
      if (shown++ == 8) {
        out << "    ... " << (t.stack.size() - 8) << " more frames\n";
        break;
      }
      out << "    " << frame_text(fr) << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void add_status_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "status",
      "What is stuck now, from a trace file, also while `ingero trace` writes it: each traced\n"
      "call in flight for longer than the tracer's --inflight-after (process, call, seconds,\n"
      "the line it was called from, its arguments and stack, what its other threads do), and\n"
      "each rank's thread that has made no GPU call for that long. Without a running tracer:\n"
      "what was stuck when it stopped.");
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd->add_option("--pid,-p", o->pid, "Only this process")
      ->check(CLI::Range(1u, 4194304u));  // PID_MAX_LIMIT: 0 read as no --pid at all
  cmd->add_flag("--json", o->json, "JSON: one object, its stuck threads in `stuck`");
  cmd->callback([&ctx, o] { ctx.exit_code = run_status(*o); });
}

}  // namespace ingero::app
