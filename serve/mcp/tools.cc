#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {

std::vector<Tool> make_tools(const ToolHost& host) {
  std::vector<Tool> t;
  add_overview_tools(t);
  add_tenant_tools(t);
  add_chain_tools(t, host);
  add_step_tools(t);
  add_kernel_tools(t);
  add_inflight_tools(t);
  add_stack_tools(t);
  add_collective_tools(t);
  add_graph_tools(t);
  add_sql_tools(t);
  return t;
}

}  // namespace ingero::serve::mcp
