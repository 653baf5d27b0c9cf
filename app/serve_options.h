// The options of ingero's HTTP servers (`dashboard`, `mcp --http`), declared once: where they
// listen, TLS, the environment variable that holds the bearer token, the Host and Origin
// allow-lists, the workers; and the one warning for a server others can reach.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "hal/result.h"

namespace ingero::app {

struct ServeOptions {
  std::string http;  // the listen address; "" = none (mcp serves stdio then)
  std::string tls_cert, tls_key;
  std::string token_env;         // the variable's name, never the token
  bool token_env_given = false;  // named with --token-env: it must be set
  std::vector<std::string> allow_hosts, allow_origins;
  size_t threads = 4;
  // The token from the environment, "" when the variable is unset; an error when it is set
  // but empty (a secret that failed to be filled in served the trace to anyone).
  ingero::Result<std::string> token() const;
};

// Options listening at `http` by default ("": none), the token in the variable `token_env`.
ServeOptions serve_options(std::string http, std::string token_env);

// Adds --http (with `listen_help`), --tls-cert, --tls-key, --token-env (`token_help`),
// --allow-host, --allow-origin and --threads to `cmd`, over `o`.
void add_serve_options(CLI::App* cmd, ServeOptions& o, const std::string& listen_help,
                       const std::string& token_help);

// What `who` ("ingero mcp") prints when it listens beyond loopback: the address, and without a
// token that anyone who reaches the port reads the trace, and how to stop that; "" on loopback.
std::string exposure_warning(const std::string& who, const ServeOptions& o, bool loopback_only,
                             bool has_token);

}  // namespace ingero::app
