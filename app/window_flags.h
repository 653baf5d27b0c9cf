// The window flags of the commands that read a trace (explain, report, export, dashboard):
// --since, --from and --to, each refused when given empty.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/window_spec.h"

namespace ingero::app {

// Adds --since (`since_help`), --from and --to into `w`. An empty value is a usage error (exit
// 2): `--since ""` read as no flag at all, the whole trace, where trace, compact and ship
// refused it. engine::check_window_spec() checks the rest once all are parsed.
void add_window_flags(CLI::App& cmd, engine::WindowSpec& w, const std::string& since_help);

}  // namespace ingero::app
