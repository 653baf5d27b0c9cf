// ingero's own credentials, given in its environment (fleet/clickhouse_endpoint.h,
// app/serve_options.h, serve/otlp/config.h): never handed to what it starts. The traced command
// and the NVML helper process inherited them (a workload's logs, or a driver library, then held
// the fleet store's password and the MCP server's token).
#pragma once

#include <string_view>
#include <vector>

namespace ingero::hal {

// The variables: INGERO_CLICKHOUSE_PASSWORD, INGERO_MCP_TOKEN, INGERO_DASHBOARD_TOKEN,
// INGERO_OTLP_HEADERS. The OpenTelemetry ones (OTEL_*) are the workload's too and stay.
inline constexpr std::string_view kSecretVariables[] = {
    "INGERO_CLICKHOUSE_PASSWORD", "INGERO_MCP_TOKEN", "INGERO_DASHBOARD_TOKEN",
    "INGERO_OTLP_HEADERS"};

// This process's environment without them: pointers into `environ`, null-terminated, for
// execve or posix_spawn. Valid while the environment is not changed.
std::vector<char*> environment_without_secrets();

}  // namespace ingero::hal
