#include <iostream>

#include "app/commands.h"
#include "app/explain_report.h"
#include "engine/window_spec.h"
#include "store/sql_trace_source.h"

namespace ingero::app {

void add_explain_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "explain",
      "Explain why GPU calls were slow: latency statistics, causal chains (CPU contention,\n"
      "I/O and memory pressure, launch collapse, repeated syncs, graph lifecycle, noisy\n"
      "neighbours, OOM) with their evidence, root cause and fixes. Works on our traces and the\n"
      "original implementation's. --since counts back from the trace's last event.");
  struct Opts {
    std::string db;
    engine::WindowSpec w;
    uint32_t pid = 0;
    bool per_process = false, json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)");
  cmd->add_option("--since", o->w.since, "Only the last 30s / 5m / 1h of the trace");
  cmd->add_option("--from", o->w.from, "Window start (2026-04-03T12:18:02, UTC, or Unix seconds)");
  cmd->add_option("--to", o->w.to, "Window end");
  cmd->add_option("--pid,-p", o->pid, "Only this process's calls");
  cmd->add_flag("--per-process", o->per_process, "Add the per-process breakdown");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->callback([&ctx, o] {
    std::string path = o->db.empty() ? default_db_path() : o->db;
    auto reader = store::TraceReader::open(path);
    if (!reader) {
      std::cerr << "ingero explain: " << reader.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    store::SqlTraceSource source(**reader);
    engine::WindowSpec spec = o->w;
    if (o->pid) spec.pid = o->pid;
    auto w = engine::resolve_window(source, spec);
    if (!w) {
      std::cerr << "ingero explain: " << w.error().message << "\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    // A merged trace holds several nodes whose pids may collide: one analysis per node.
    std::vector<std::string> nodes = source.nodes();
    if (nodes.size() < 2) nodes = {""};
    nlohmann::json all = nlohmann::json::array();
    for (const std::string& node : nodes) {
      engine::Window nw = *w;
      if (!node.empty()) nw.node = node;
      engine::Analysis a = engine::analyze(source, nw);
      if (!source.error().empty()) {
        std::cerr << "ingero explain: reading " << path << ": " << source.error() << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
      ReportOptions ro{node.empty() ? path : path + " [node " + node + "]",
                       (*reader)->is_legacy() ? (*reader)->format_name() : "", o->per_process};
      if (o->json) {
        auto j = report_json(a, ro);
        if (!node.empty()) j["node"] = node;
        all.push_back(std::move(j));
      } else {
        if (&node != &nodes.front()) std::cout << "\n";
        print_report(std::cout, a, ro);
      }
    }
    if (o->json)
      std::cout << (all.size() == 1 ? all[0] : nlohmann::json{{"nodes", all}})
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
