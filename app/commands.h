// Subcommand registration. Each command adds itself to the CLI and, when run, stores its
// process exit code in Context::exit_code.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "hal/backend.h"

namespace ingero::app {

// Exit codes, documented in docs/cli.md.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,    // bad input file, SQL error, runtime failure
  kExitUsage = 2,      // bad arguments
  kExitNoTracing = 3,  // the host cannot trace (check failed, no privilege)
};

struct Context {
  hal::BackendRegistry registry;
  int exit_code = kExitOk;
};

// ~/.ingero/ingero.db, with ~ as app/default_trace_path.h decides; `note` gets a sentence for
// people when HOME was set and not taken.
std::string default_db_path();
std::string default_db_path(std::string* note);

void add_version_command(CLI::App& app, Context& ctx);
void add_query_command(CLI::App& app, Context& ctx);
void add_check_command(CLI::App& app, Context& ctx);
void add_trace_command(CLI::App& app, Context& ctx);
void add_explain_command(CLI::App& app, Context& ctx);
void add_status_command(CLI::App& app, Context& ctx);
void add_demo_command(CLI::App& app, Context& ctx);
void add_merge_command(CLI::App& app, Context& ctx);
void add_export_command(CLI::App& app, Context& ctx);
void add_mcp_command(CLI::App& app, Context& ctx);
void add_report_command(CLI::App& app, Context& ctx);
void add_dashboard_command(CLI::App& app, Context& ctx);

// A CLI tree holding every subcommand a config file may configure (config_file.h), for
// validating a file without running anything.
std::unique_ptr<CLI::App> config_cli_schema();
void add_ship_command(CLI::App& app, Context& ctx);
void add_compact_command(CLI::App& app, Context& ctx);

}  // namespace ingero::app
