#include <iostream>

#include "app/commands.h"
#include "app/result_printer.h"
#include "store/query_json.h"
#include "store/trace_reader.h"

namespace ingero::app {

void add_query_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "query",
      "Run one read-only SQL statement against a trace file (ours or the original Go\n"
      "implementation's). Writes, ATTACH, state-changing pragmas and extensions are refused\n"
      "by SQLite itself. Views: calls, cuda_events, hip_events, nccl_events, host_events,\n"
      "tcp_events; tables: events, sessions, ops, sources, process_names, libraries.");
  struct Opts {
    std::string db;
    std::vector<std::string> args;
    bool json = false;
    size_t limit = 10000;
    int timeout_s = 30;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)");
  cmd->add_option("args", o->args, "[PATH] SQL")->required()->expected(1, 2);
  cmd->add_flag("--json", o->json, "Print a JSON array of row objects");
  cmd->add_option("--limit", o->limit, "Stop after this many rows")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Abort the statement after this many seconds")
      ->capture_default_str();
  cmd->callback([&ctx, o] {
    std::string path = o->db, sql;
    if (o->args.size() == 2) {
      if (!path.empty()) {
        std::cerr << "ingero query: give the trace either as --db or as the first argument\n";
        ctx.exit_code = kExitUsage;
        return;
      }
      path = o->args[0];
      sql = o->args[1];
    } else {
      sql = o->args[0];
    }
    if (path.empty()) path = default_db_path();
    auto reader = store::TraceReader::open(path);
    if (!reader) {
      std::cerr << "ingero query: " << reader.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    store::QueryLimits limits;
    limits.max_rows = o->limit;
    limits.timeout_ms = o->timeout_s * 1000;
    limits.max_bytes = 256u << 20;
    limits.max_value_bytes = 64 << 20;
    auto res = store::run_query(**reader, sql, limits);
    if (!res) {
      std::cerr << "ingero query: " << res.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    if (o->json) {
      std::cout << store::to_json(*res).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace)
                << "\n";
      if (res->truncated)
        std::cerr << "ingero query: truncated at " << res->truncated_reason << "\n";
    } else {
      print_table(std::cout, *res);
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
