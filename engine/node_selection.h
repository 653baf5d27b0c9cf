// Which nodes of a trace a command reads: every node it holds, or those asked for with
// --node (each must exist); and that the process asked for with --pid is one it names. Shared
// by explain, export and the MCP tools' windows.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"

namespace ingero::engine {

ingero::Result<std::vector<std::string>> pick_nodes(std::vector<std::string> have,
                                                    const std::vector<std::string>& asked);

// --pid: a process the trace names (its process names), or an error listing those it does (a
// mistyped pid read as a quiet process: "nothing in this window needs explaining"). A trace
// that names no process takes any pid.
ingero::Status check_pid(const std::map<uint32_t, ProcessInfo>& have, uint32_t pid);

}  // namespace ingero::engine
