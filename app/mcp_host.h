// What `ingero mcp` hands the MCP server (serve/mcp ToolHost): the tools that run code of other
// commands, the host audit of `check` and the scenarios of `demo`.
#pragma once

#include "hal/backend.h"
#include "serve/mcp/tools.h"

namespace ingero::app {

// `registry` must outlive the returned host.
serve::mcp::ToolHost mcp_tool_host(const hal::BackendRegistry& registry);

}  // namespace ingero::app
