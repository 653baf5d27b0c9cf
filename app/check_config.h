// `ingero check --config FILE`: validates an agent config file without tracing anything.
#pragma once

#include <ostream>
#include <string>

namespace ingero::app {

// Prints every problem as FILE:LINE:COL (or the settings when there is none, or JSON).
// Returns kExitOk when the file is valid, kExitFailure otherwise.
int run_config_check(const std::string& path, bool json, std::ostream& out);

}  // namespace ingero::app
