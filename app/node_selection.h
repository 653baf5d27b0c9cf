// Which nodes of a trace a command reads: every node it holds, or those asked for with
// --node (each must exist). Shared by explain and export.
#pragma once

#include <string>
#include <vector>

#include "hal/result.h"

namespace ingero::app {

ingero::Result<std::vector<std::string>> pick_nodes(std::vector<std::string> have,
                                                    const std::vector<std::string>& asked);

}  // namespace ingero::app
