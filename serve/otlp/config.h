// Where and how the OTLP exporter sends: the endpoint of each signal, the headers, TLS files,
// compression and the request timeout, resolved once from `--otlp` and the OpenTelemetry
// environment variables (the OTLP exporter specification's names). Pure: the environment is a
// function, so tests pass their own.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hal/result.h"

namespace ingero::serve::otlp {

enum class Signal { kMetrics = 0, kLogs = 1, kTraces = 2 };
inline constexpr size_t kSignals = 3;
std::string_view signal_name(Signal s);  // "metrics", "logs", "traces"

using Headers = std::vector<std::pair<std::string, std::string>>;
// An environment variable's value; nullopt when unset.
using EnvFn = std::function<std::optional<std::string>(const char* name)>;
EnvFn process_env();  // getenv

struct ExporterConfig {
  std::array<std::string, kSignals> urls;     // the full URL each signal is POSTed to
  std::string display;                        // the endpoint as printed: "http://host:4318"
  Headers headers;                            // added to every request (never printed)
  std::string ca_file;                        // PEM CAs that verify the server ("": the system's)
  std::string client_cert, client_key;        // PEM client certificate and key (mutual TLS)
  bool gzip = false;                          // Content-Encoding: gzip request bodies
  std::chrono::milliseconds timeout{10'000};  // one request, connect to last byte
  const std::string& url(Signal s) const { return urls[size_t(s)]; }
};

// `endpoint` is the value of `--otlp`:
//   - a base URL, http[s]://HOST[:PORT][/PATH]: each signal goes to BASE/v1/metrics,
//     BASE/v1/logs, BASE/v1/traces (the rule of OTEL_EXPORTER_OTLP_ENDPOINT);
//   - "env": the base from OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318), and a
//     signal's own OTEL_EXPORTER_OTLP_{METRICS,LOGS,TRACES}_ENDPOINT, used as written, wins.
// Whatever the endpoint, from the environment:
//   - headers: OTEL_EXPORTER_OTLP_HEADERS, then INGERO_OTLP_HEADERS (its value wins for a name
//     in both), each "name=value,name2=value2", percent-decoded (parse_headers);
//   - TLS: OTEL_EXPORTER_OTLP_CERTIFICATE (CA file), OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and
//     OTEL_EXPORTER_OTLP_CLIENT_KEY (both or neither), files that must be readable;
//   - OTEL_EXPORTER_OTLP_COMPRESSION: "gzip" or "none" (default);
//   - OTEL_EXPORTER_OTLP_TIMEOUT: milliseconds per request (default 10000).
// Errors name the variable or the value: a URL that is not http(s), carries a user name or
// password (credentials go in headers), or has no host; a malformed header list; a TLS file
// that cannot be read; an unknown compression; a timeout that is not a positive integer.
ingero::Result<ExporterConfig> resolve_config(const std::string& endpoint, const EnvFn& env);

// "k1=v1,k2=v2" as the OTel specification writes header and resource-attribute lists:
// surrounding blanks trimmed, names and values percent-decoded ("%20" is a blank, "%2C" a
// comma). An empty list is no headers. An entry without '=' or with an empty name, a bad
// percent escape, or a CR, LF or NUL in a decoded value is an error naming the entry's position.
ingero::Result<Headers> parse_key_values(std::string_view text);
// The same, and every name must be an HTTP token (RFC 9110): the header lists.
ingero::Result<Headers> parse_headers(std::string_view text);

}  // namespace ingero::serve::otlp
