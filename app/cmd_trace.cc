// `ingero trace`: the command, its flags (app/trace_flags.h) and what runs it (app/tracer.h).
#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/config_file.h"
#include "app/trace_flags.h"
#include "app/tracer.h"

namespace ingero::app {

void add_trace_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "trace",
      "Trace GPU runtime calls (uprobes on every vendor library found) and host context into a\n"
      "SQLite trace file. Needs root or CAP_BPF+CAP_PERFMON. Stops after --duration, on\n"
      "SIGINT/SIGTERM, or when COMMAND (after --) exits; the last batch is always flushed.\n"
      "Examples:\n"
      "  ingero trace --duration 60s\n"
      "  ingero trace --pid 4411 --db /tmp/run.db\n"
      "  ingero trace --db /tmp/run.db -- python3 train.py");
  auto o = std::make_shared<TraceOptions>();
  auto a = std::make_shared<trace_flags::Args>();
  trace_flags::add_target(*cmd, *o, *a);
  trace_flags::add_calls(*cmd, *o, *a);
  trace_flags::add_host(*cmd, *o, *a);
  trace_flags::add_storage(*cmd, *o, *a);
  trace_flags::add_export(*cmd, *o, *a);
  cmd->add_option("command", o->command, "Command to run and trace (after --)")
      ->configurable(false);
  cmd->positionals_at_end(true);
  add_config_option(app, *cmd, config_cli_schema, [](const CLI::App& table) {
    return trace_flags::conflict(table, /*with_command=*/false);
  });
  cmd->callback([&ctx, o, a, cmd] {
    trace_flags::resolve(*a, *o);
    if (auto why = trace_flags::conflict(*cmd)) {
      std::cerr << "ingero trace: " << *why << "\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    if (o->no_archive)
      std::cerr << "ingero trace: --no-archive has no effect: calls are kept in compressed "
                   "blocks from the start (`ingero export --format sqlite` writes plain rows)\n";
    if (auto note = trace_flags::notice(*o, a->rdma_verbs); note && !o->quiet)
      std::cerr << "ingero trace: " << *note << "\n";
    o->flags = trace_flags::session_flags(*o, a->rdma_verbs);
    if (a->rdma_verbs) {
      hal::BackendRegistry with_verbs;
      register_builtin_backends(with_verbs, {.rdma_verbs = true});
      ctx.exit_code = run_trace(*o, with_verbs);
      return;
    }
    ctx.exit_code = run_trace(*o, ctx.registry);
  });
}

}  // namespace ingero::app
