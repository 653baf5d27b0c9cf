// The Prometheus web configuration file (Prometheus' and its exporters' --web.config.file,
// https://prometheus.io/docs/prometheus/latest/configuration/https/), so that securing
// ingero's /metrics is done the way Prometheus users already know:
//
//   tls_server_config:
//     cert_file: server.crt            # relative names: from the config file's folder
//     key_file: server.key
//     client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
//     client_ca_file: clients-ca.crt
//     min_version: TLS12               # TLS12 or TLS13; max_version likewise
//   http_server_config:
//     headers: { X-Frame-Options: deny, Strict-Transport-Security: max-age=31536000 }
//   basic_auth_users:
//     alice: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze   # bcrypt
//
// A key this file format has but ingero does not implement (inline cert/key/client_ca,
// cipher_suites, curve_preferences, client_allowed_sans, rate_limit, the client-auth types
// that do not verify certificates, TLS10/TLS11) is an Error naming it, never silently
// ignored; so is an unknown key, as in Prometheus. The file is read once, at start.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hal/result.h"
#include "serve/http/server.h"
#include "serve/http/tls.h"

namespace ingero::serve::http {

struct WebConfig {
  std::optional<TlsOptions> tls;                             // absent: plain HTTP
  std::map<std::string, std::string> basic_auth_users;       // user -> bcrypt hash; empty: no auth
  std::vector<std::pair<std::string, std::string>> headers;  // http_server_config.headers
};

Result<WebConfig> load_web_config(const std::string& path);
// `base_dir` resolves relative file names.
Result<WebConfig> parse_web_config(const std::string& yaml, const std::string& base_dir,
                                   const std::string& name = "web config");

// TLS into options.tls, basic_auth_users into options.auth (a BasicAuth with realm `realm`),
// headers into options.response_headers. A bad bcrypt hash is an Error naming the user.
Status apply_web_config(const WebConfig& config, ServerOptions& options,
                        const std::string& realm = "ingero");

}  // namespace ingero::serve::http
