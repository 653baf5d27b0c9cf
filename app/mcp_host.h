// What `ingero mcp` hands the MCP server (serve/mcp ToolHost): the tools that run code of other
// commands, the host audit of `check` and the scenarios of `demo`; and, over a fleet
// (--source), the ClickHouse database the tools read instead of a trace file.
#pragma once

#include "fleet/clickhouse_endpoint.h"
#include "hal/backend.h"
#include "serve/mcp/tools.h"

namespace ingero::app {

// `registry` must outlive the returned host.
serve::mcp::ToolHost mcp_tool_host(const hal::BackendRegistry& registry);

// The same, reading the fleet database at `endpoint` (fleet/clickhouse_source.h), one
// connection per tool call.
serve::mcp::ToolHost mcp_fleet_host(const hal::BackendRegistry& registry,
                                    const fleet::Endpoint& endpoint);

}  // namespace ingero::app
