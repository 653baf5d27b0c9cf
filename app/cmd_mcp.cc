// `ingero mcp`: the trace as MCP tools for AI agents, over stdio or Streamable HTTP.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "app/mcp_host.h"
#include "serve/mcp/server.h"
#include "serve/mcp/transport.h"

namespace ingero::app {
namespace {

namespace mcp = serve::mcp;

std::atomic<bool> g_mcp_stop{false};
void on_signal(int) { g_mcp_stop = true; }

struct McpOptions {
  std::string db = default_db_path();
  std::string http;
  std::string tls_cert, tls_key;
  std::string token_env = "INGERO_MCP_TOKEN";
  std::vector<std::string> allow_hosts, allow_origins;
  size_t threads = 4;
};

int run_mcp(Context& ctx, const McpOptions& o) {
  mcp::ToolContext tools(o.db, mcp_tool_host(ctx.registry));
  if (auto st = tools.validate(); !st) {
    std::cerr << "ingero mcp: " << st.error().message << "\n";
    return kExitFailure;
  }
  mcp::Server server(tools);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (o.http.empty()) {
    std::cerr << "ingero mcp: serving " << o.db << " over stdio (MCP " << mcp::kLatestVersion
              << ", 2025-06-18)\n";
    return mcp::serve_stdio(server, o.threads, g_mcp_stop);
  }
  mcp::HttpOptions h;
  h.addr = o.http;
  h.tls_cert = o.tls_cert;
  h.tls_key = o.tls_key;
  h.allow_hosts = o.allow_hosts;
  h.allow_origins = o.allow_origins;
  h.threads = o.threads;
  if (const char* t = std::getenv(o.token_env.c_str()); t && *t) h.token = t;
  mcp::HttpServer http(server, h);
  if (auto st = http.start(); !st) {
    std::cerr << "ingero mcp: " << st.error().message << "\n";
    return kExitUsage;
  }
  std::cerr << "ingero mcp: serving " << o.db << " at " << http.url()
            << (h.token.empty() ? " (no token: set " + o.token_env + " to require one)"
                                : " (bearer token required)")
            << "\n";
  if (!http.loopback_only())
    std::cerr << "ingero mcp: WARNING: " << o.http << " is reachable from other hosts"
              << (h.token.empty() ? " and there is no bearer token: anyone who can reach this "
                                    "port can read the trace. Set " +
                                        o.token_env + " and use --tls-cert/--tls-key.\n"
                                  : ".\n");
  return http.run(g_mcp_stop);
}

}  // namespace

void add_mcp_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<McpOptions>();
  auto* cmd = app.add_subcommand("mcp",
                                 "Serve a trace file to AI agents over MCP (stdio by default, or "
                                 "Streamable HTTP with --http)");
  cmd->add_option("--db,-d", o->db,
                  "Trace file (ours or the original implementation's), opened read-only")
      ->capture_default_str();
  cmd->add_option(
      "--http", o->http,
      "Serve Streamable HTTP at ADDR/mcp instead of stdio: 127.0.0.1:8081, :8081 (loopback), "
      "0.0.0.0:8081 (all interfaces: set a token and TLS)");
  cmd->add_option("--tls-cert", o->tls_cert, "PEM certificate chain: serve HTTPS");
  cmd->add_option("--tls-key", o->tls_key, "PEM private key for --tls-cert");
  cmd->add_option(
         "--token-env", o->token_env,
         "Environment variable holding the bearer token HTTP clients must send (never a flag)")
      ->capture_default_str();
  cmd->add_option(
      "--allow-host", o->allow_hosts,
      "Extra Host name accepted over HTTP (DNS-rebinding check), e.g. gpu-node-01; repeatable");
  cmd->add_option("--allow-origin", o->allow_origins,
                  "Extra Origin accepted over HTTP, exactly; repeatable");
  cmd->add_option("--threads", o->threads, "Requests served in parallel")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->callback([&ctx, o] { ctx.exit_code = run_mcp(ctx, *o); });
}

}  // namespace ingero::app
