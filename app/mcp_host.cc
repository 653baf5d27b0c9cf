#include "app/mcp_host.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "app/builtin_backends.h"
#include "app/check_items.h"
#include "app/demo_scenarios.h"
#include "engine/json_text.h"
#include "fleet/clickhouse_source.h"

namespace ingero::app {
namespace {

// A ClickHouse JSON value as a SQL result cell: numbers as numbers (64-bit integers come
// unquoted), anything else (arrays, maps, tuples) as its JSON text.
store::Value cell(const nlohmann::json& v) {
  if (v.is_null()) return std::monostate{};
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) return int64_t(v.get<uint64_t>());
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return int64_t(v.get<bool>());
  return engine::json_text(v);
}

// One read-only statement in ClickHouse (readonly=1, enforced by the server), its answer in
// JSONCompact, held to `lim`: rows (the server stops one past them), the result's size as JSON,
// the time.
ingero::Result<store::QueryResult> clickhouse_query(const fleet::Endpoint& e,
                                                    const std::string& sql,
                                                    const store::QueryLimits& lim) {
  fleet::ClientOptions co;
  co.request_timeout_ms = lim.timeout_ms + 5000;
  fleet::ClickHouseClient client(e, co);
  fleet::Settings s = fleet::read_only_settings(e.database, "JSONCompact", lim.max_rows + 1,
                                                std::max(1, lim.timeout_ms / 1000));
  std::string body;
  bool too_big = false;
  // The answer is read up to the size budget (and twice it for the JSON around the rows).
  auto st = client.stream(
      sql, s,
      [&](std::string_view chunk) {
        if (body.size() + chunk.size() > 2 * lim.max_bytes + (64u << 10)) {
          too_big = true;
          return false;
        }
        body.append(chunk);
        return true;
      },
      lim.timeout_ms + 5000);
  if (!st && !too_big) return st.error();
  if (too_big)
    return ingero::make_error("the answer passed " + std::to_string(lim.max_bytes) +
                              " bytes before its first rows could be read: select fewer columns "
                              "or add a LIMIT");
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("meta") || !j.contains("data"))
    return ingero::make_error("ClickHouse answered something other than JSONCompact: " +
                              body.substr(0, 200));
  store::QueryResult out;
  for (const auto& m : j["meta"]) out.columns.push_back(m.value("name", ""));
  size_t bytes = 0;
  for (const auto& row : j["data"]) {
    if (out.rows.size() == lim.max_rows) {
      out.truncated = true;
      out.truncated_reason = "row limit " + std::to_string(lim.max_rows);
      break;
    }
    size_t cost = engine::json_text(row).size() + 1;
    if (bytes + cost > lim.max_bytes) {
      out.truncated = true;
      out.truncated_reason = "result size limit of " + std::to_string(lim.max_bytes) + " bytes";
      break;
    }
    bytes += cost;
    std::vector<store::Value> r;
    for (const auto& v : row) r.push_back(cell(v));
    out.rows.push_back(std::move(r));
  }
  return out;
}

class ClickHouseFleet final : public serve::mcp::FleetSource {
 public:
  explicit ClickHouseFleet(const fleet::Endpoint& e)
      : endpoint_(e), source_(std::make_unique<fleet::ClickHouseClient>(e)) {
    source_.name_errors_with(builtin_error_codes());
  }
  engine::TraceSource& source() override { return source_; }
  std::vector<std::string> nodes() override { return source_.nodes(); }
  void set_scope(const std::optional<std::string>& node) override { source_.set_scope(node); }
  void set_clock_offsets(const std::map<std::string, int64_t>& offsets) override {
    source_.set_clock_offsets(offsets);
  }
  std::string error() const override { return source_.error(); }
  std::string title() const override { return source_.endpoint().display(); }
  ingero::Result<store::QueryResult> query(const std::string& sql,
                                           const store::QueryLimits& limits) override {
    return clickhouse_query(endpoint_, sql, limits);
  }

 private:
  fleet::Endpoint endpoint_;
  fleet::ClickHouseTraceSource source_;
};

}  // namespace

serve::mcp::ToolHost mcp_tool_host(const hal::BackendRegistry& registry) {
  serve::mcp::ToolHost h;
  h.audit = [&registry] { return check_report_json(run_checks(registry, registry.all())); };
  for (const auto& d : demo_scenarios()) h.demos.push_back({d.name, d.description});
  h.write_demo = write_demo;
  h.views = registry.views();
  h.error_codes = [&registry](std::string_view api, int64_t ret) {
    return registry.error_code(api, ret);
  };
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
