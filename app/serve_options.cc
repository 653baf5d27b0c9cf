#include "app/serve_options.h"

#include <cstdlib>

namespace ingero::app {

ingero::Result<std::string> ServeOptions::token() const {
  const char* t = std::getenv(token_env.c_str());
  // Named on purpose and not set (a typo, a secret not mounted): served without a token, it
  // read as protected and was not.
  if (!t && token_env_given)
    return ingero::make_error("--token-env " + token_env +
                              ": the variable is not set: set it to the token, or leave "
                              "--token-env out to serve without one");
  if (t && !*t)
    return ingero::make_error("$" + token_env +
                              " is set but empty: unset it to serve without a token, or give "
                              "it the token");
  return std::string(t ? t : "");
}

ServeOptions serve_options(std::string http, std::string token_env) {
  ServeOptions o;
  o.http = std::move(http);
  o.token_env = std::move(token_env);
  return o;
}

void add_serve_options(CLI::App* cmd, ServeOptions& o, const std::string& listen_help,
                       const std::string& token_help) {
  auto* http = cmd->add_option("--http", o.http, listen_help);
  if (!o.http.empty()) http->capture_default_str();
  cmd->add_option("--tls-cert", o.tls_cert, "PEM certificate chain: serve HTTPS");
  cmd->add_option("--tls-key", o.tls_key, "PEM private key for --tls-cert");
  cmd->add_option("--token-env", o.token_env, token_help)
      ->capture_default_str()
      ->each([&o](const std::string&) { o.token_env_given = true; });
  cmd->add_option("--allow-host", o.allow_hosts,
                  "Extra Host name accepted (DNS-rebinding check), e.g. gpu-node-01; repeatable");
  cmd->add_option("--allow-origin", o.allow_origins, "Extra Origin accepted, exactly; repeatable");
  cmd->add_option("--threads", o.threads, "Requests served in parallel")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

std::string exposure_warning(const std::string& who, const ServeOptions& o, bool loopback_only,
                             bool has_token) {
  if (loopback_only) return "";
  std::string w = who + ": WARNING: " + o.http + " is reachable from other hosts";
  if (has_token) return w + ".\n";
  return w +
         " and there is no bearer token: anyone who can reach this port can read the trace. "
         "Set " +
         o.token_env + " and use --tls-cert/--tls-key.\n";
}

}  // namespace ingero::app
