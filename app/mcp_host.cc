#include "app/mcp_host.h"

#include "app/check_items.h"
#include "app/demo_scenarios.h"
#include "fleet/clickhouse_source.h"

namespace ingero::app {
namespace {

class ClickHouseFleet final : public serve::mcp::FleetSource {
 public:
  explicit ClickHouseFleet(const fleet::Endpoint& e)
      : source_(std::make_unique<fleet::ClickHouseClient>(e)) {}
  engine::TraceSource& source() override { return source_; }
  std::vector<std::string> nodes() override { return source_.nodes(); }
  void set_scope(const std::optional<std::string>& node) override { source_.set_scope(node); }
  void set_clock_offsets(const std::map<std::string, int64_t>& offsets) override {
    source_.set_clock_offsets(offsets);
  }
  std::string error() const override { return source_.error(); }
  std::string title() const override { return source_.endpoint().display(); }

 private:
  fleet::ClickHouseTraceSource source_;
};

}  // namespace

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

serve::mcp::ToolHost mcp_fleet_host(const hal::BackendRegistry& registry,
                                    const fleet::Endpoint& endpoint) {
  serve::mcp::ToolHost h = mcp_tool_host(registry);
  h.fleet = [endpoint]() -> ingero::Result<std::unique_ptr<serve::mcp::FleetSource>> {
    return std::unique_ptr<serve::mcp::FleetSource>(std::make_unique<ClickHouseFleet>(endpoint));
  };
  return h;
}

}  // namespace ingero::app
