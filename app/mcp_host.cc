#include "app/mcp_host.h"

#include "app/check_items.h"
#include "app/demo_scenarios.h"

namespace ingero::app {

serve::mcp::ToolHost mcp_tool_host(const hal::BackendRegistry& registry) {
  serve::mcp::ToolHost h;
  h.audit = [&registry] { return check_report_json(run_checks(registry, registry.all())); };
  for (const auto& d : demo_scenarios()) h.demos.push_back({d.name, d.description});
  h.write_demo = write_demo;
  h.views = registry.views();
  h.device_event_name = [&registry](std::string_view api, uint64_t type) {
    return registry.device_event_name(api, type);
  };
  return h;
}

}  // namespace ingero::app
