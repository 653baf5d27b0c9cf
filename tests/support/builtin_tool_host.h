// What `ingero mcp` serves with: the backends it registers (built once), as a tool host for the
// MCP tests' ToolContext.
#pragma once

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "hal/backend.h"

namespace ingero::test {

inline const hal::BackendRegistry& builtin_registry() {
  static const hal::BackendRegistry registry = [] {
    hal::BackendRegistry r;
    app::register_builtin_backends(r);
    return r;
  }();
  return registry;
}

inline serve::mcp::ToolHost builtin_tool_host() { return app::mcp_tool_host(builtin_registry()); }

}  // namespace ingero::test
