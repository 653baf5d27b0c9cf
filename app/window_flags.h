// The flags the commands that read a trace share: the window (explain, report, export,
// dashboard: --since, --from and --to, each refused when given empty), and file paths.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/window_spec.h"

namespace ingero::app {

// Adds --since (`since_help`), --from and --to into `w`. An empty value is a usage error (exit
// 2): `--since ""` read as no flag at all, the whole trace, where trace, compact and ship
// refused it. engine::check_window_spec() checks the rest once all are parsed.
void add_window_flags(CLI::App& cmd, engine::WindowSpec& w, const std::string& since_help);

// A file path given empty (`--db "$TRACE"` with TRACE unset) is a usage error (exit 2): read as
// no flag, it was the default ~/.ingero/ingero.db, a file the user never named, or for an
// output, standard output.
CLI::Validator path_given();

}  // namespace ingero::app
