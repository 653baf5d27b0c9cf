#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/man_page.h"
#include "app/stdout_check.h"
#include "app/trace_signals.h"
#include "app/traced_command.h"
#include "backends/nvml/nvml_child.h"
#include "store/schema.h"

namespace ingero::app {

// What `ingero version` and `ingero --version` print.
std::string version_line() {
  return std::string("ingero ") + INGERO_VERSION + " (C++20, libbpf CO-RE, schema " +
         std::to_string(store::kSchemaVersion) + ")\n";
}

void add_version_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("version", "Print the version and build facts");
  cmd->callback([&ctx] {
    std::cout << version_line();
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app

int main(int argc, char** argv) {
  using namespace ingero::app;
  // NVML's own process (hal/sampler_process.h), started by the tracer or `check`, never by hand.
  // It ends with _Exit: a driver library with a thread still inside it (an nvmlInit_v2 given
  // up) must not run its destructors on the way out.
  if (argc >= 2 && std::string_view(argv[1]) == ingero::backends::nvml::kSamplerCommand) {
    int rc = ingero::backends::nvml::sampler_main(argc - 2, argv + 2);
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  // `trace`'s stop signals end the session from the tracer's first instant: installed when the
  // run began, SIGTERM or SIGHUP in its first ~20 ms (registering the commands, reading the
  // config file) killed it silently, and a SIGINT a script's `&` had ignored was dropped then
  // and honoured later.
  if (argc >= 2 && std::string_view(argv[1]) == "trace") trace_detail::install_signal_handlers();
  // What `ingero trace -- CMD` hands on to CMD: what ingero itself was given, nothing more.
  note_inherited_fds();
  // The running binary, whichever path it was started by and even if it was replaced since.
  set_sampler_executable("/proc/self/exe");
  CLI::App app{
      "ingero: eBPF GPU debugging agent. Traces CUDA, HIP, NCCL/RCCL and RDMA calls plus the\n"
      "Linux scheduler, memory, block I/O and TCP, and explains GPU stalls."};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  // `ingero --version`, as most tools take it: `ingero version`'s answer. It read "A subcommand
  // is required".
  app.add_flag_callback(
      "--version,-V",
      [] {
        std::cout << version_line();
        throw CLI::Success();
      },
      "Print the version and exit");
  // A standard output closed early (`| head -1`) is a write error each command says, exit 1,
  // not a silent death by SIGPIPE. The traced command gets it back (traced_command.cc).
  std::signal(SIGPIPE, SIG_IGN);
  CheckedStdout out;
  Context ctx;
  register_builtin_backends(ctx.registry);
  add_check_command(app, ctx);
  add_trace_command(app, ctx);
  add_explain_command(app, ctx);
  add_status_command(app, ctx);
  add_query_command(app, ctx);
  add_report_command(app, ctx);
  add_dashboard_command(app, ctx);
  add_demo_command(app, ctx);
  add_merge_command(app, ctx);
  add_compact_command(app, ctx);
  add_export_command(app, ctx);
  add_mcp_command(app, ctx);
  add_ship_command(app, ctx);
  add_version_command(app, ctx);
  add_man_page_command(app, ctx);
  // Output that did not reach its reader (a full disk, /dev/full, a closed pipe) is a failure:
  // `query` and `explain` must not exit 0 with their answer lost, nor `--help` with its text.
  auto finish = [&out](int code) {
    if (auto st = out.finish(); !st) {
      std::cerr << "ingero: " << st.error().message << "\n";
      return code == kExitOk ? kExitFailure : code;
    }
    return code;
  };
  // A command that is not one (a typo) said "A subcommand is required", as if none was given.
  auto known = [&app](const char* name) {
    try {
      return app.get_subcommand(name) != nullptr;
    } catch (const CLI::Error&) {
      return false;
    }
  };
  if (argc >= 2 && argv[1][0] != '-' && !known(argv[1])) {
    std::string names;
    for (const auto* sub :
         app.get_subcommands([](const CLI::App* c) { return !c->get_group().empty(); }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::cerr << "ingero: unknown command '" << argv[1] << "' (commands: " << names
              << "; ingero --help)\n";
    return finish(kExitUsage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return finish(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return finish(app.exit(e));
  } catch (const CLI::Success&) {
    return finish(kExitOk);
  } catch (const CLI::ParseError& e) {
    // A stop signal while `trace` read its flags (a --config on a FIFO no one writes): the
    // read it interrupted is no usage error ("was not readable (missing?)").
    if (int sig = trace_detail::g_stop_signal) {
      std::cerr << "ingero: " << trace_detail::signal_name(sig)
                << " before tracing began: nothing was traced\n";
      return 128 + sig;
    }
    app.exit(e);
    return kExitUsage;
  }
  return finish(ctx.exit_code);
}
