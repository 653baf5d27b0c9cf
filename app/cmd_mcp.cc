// `ingero mcp`: the trace as MCP tools for AI agents, over stdio or Streamable HTTP.
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/byte_size.h"
#include "app/commands.h"
#include "app/mcp_host.h"
#include "app/serve_options.h"
#include "app/window_flags.h"
#include "fleet/clickhouse_endpoint.h"
#include "serve/mcp/server.h"
#include "serve/mcp/transport.h"
#include "store/temp_file_cap.h"

namespace ingero::app {
namespace {

namespace mcp = serve::mcp;

std::atomic<bool> g_mcp_stop{false};
void on_signal(int) { g_mcp_stop = true; }

struct McpOptions {
  std::string db = default_db_path();
  std::string source;  // clickhouse://HOST:8123/DB: the fleet instead of a file
  std::string max_temp = "1GiB";
  ServeOptions serve = serve_options("", "INGERO_MCP_TOKEN");
};

int run_mcp(Context& ctx, const McpOptions& o) {
  if (o.serve.http.empty() && (!o.serve.tls_cert.empty() || !o.serve.tls_key.empty())) {
    // Served over stdio they were ignored without a word.
    std::cerr << "ingero mcp: --tls-cert and --tls-key are for --http (stdio has no TLS)\n";
    return kExitUsage;
  }
  std::string serving = o.db;
  mcp::ToolHost host = mcp_tool_host(ctx.registry);
  if (!o.source.empty()) {
    auto ep = fleet::parse_endpoint(o.source);
    if (!ep) {
      std::cerr << "ingero mcp: " << ep.error().message << "\n";
      return kExitUsage;
    }
    serving = "the fleet database " + ep->display();
    host = mcp_fleet_host(ctx.registry, *ep);
  }
  // Every connection opened from now on counts its temporary files: run_sql's sorts, GROUP BY
  // and DISTINCT spilled hundreds of MB each, requests in parallel and without end.
  if (o.source.empty())
    if (auto st = store::cap_temp_files(INT64_MAX / 2); !st) {
      std::cerr << "ingero mcp: " << st.error().message << "\n";
      return kExitFailure;
    }
  mcp::ToolContext tools(o.source.empty() ? o.db : o.source, std::move(host));
  if (auto st = tools.validate(); !st) {
    std::cerr << "ingero mcp: " << st.error().message << "\n";
    return kExitFailure;
  }
  if (o.source.empty()) store::cap_temp_files_beyond_held(parse_size(o.max_temp));
  mcp::Server server(tools);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: stop as for the others (it was rc 129)
  signal(SIGPIPE, SIG_IGN);
  const ServeOptions& s = o.serve;
  if (s.http.empty()) {
    std::cerr << "ingero mcp: serving " << serving << " over stdio (MCP " << mcp::kLatestVersion
              << ", 2025-06-18)\n";
    return mcp::serve_stdio(server, s.threads, g_mcp_stop);
  }
  mcp::HttpOptions h;
  h.addr = s.http;
  h.tls_cert = s.tls_cert;
  h.tls_key = s.tls_key;
  h.allow_hosts = s.allow_hosts;
  h.allow_origins = s.allow_origins;
  h.threads = s.threads;
  auto token = s.token();
  if (!token) {
    std::cerr << "ingero mcp: " << token.error().message << "\n";
    return kExitUsage;
  }
  h.token = *token;
  mcp::HttpServer http(server, h);
  if (auto st = http.start(); !st) {
    std::cerr << "ingero mcp: " << st.error().message << "\n";
    return kExitUsage;
  }
  std::cerr << "ingero mcp: serving " << serving << " at " << http.url()
            << (h.token.empty() ? " (no token: set " + s.token_env + " to require one)"
                                : " (bearer token required)")
            << "\n";
  std::cerr << exposure_warning("ingero mcp", s, http.loopback_only(), !h.token.empty());
  int rc = http.run(g_mcp_stop);
  if (g_mcp_stop) std::cerr << "ingero mcp: stopping\n";
  return rc;
}

}  // namespace

void add_mcp_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<McpOptions>();
  auto* cmd = app.add_subcommand("mcp",
                                 "Serve a trace file to AI agents over MCP (stdio by default, or "
                                 "Streamable HTTP with --http)");
  cmd->add_option("--db,-d", o->db,
                  "Trace file (ours or the original implementation's), opened read-only")
      ->capture_default_str()
      ->check(path_given());
  cmd->add_option("--source", o->source,
                  "Serve a fleet from ClickHouse instead of a file: clickhouse://HOST:8123/DB "
                  "(clickhouses:// for TLS; password in INGERO_CLICKHOUSE_PASSWORD). The tools "
                  "that analyse calls answer over every node and run_sql runs in ClickHouse "
                  "(read-only); those that read a file itself (get_check, get_stacks, "
                  "get_rdma_counters) are refused");
  cmd->add_option("--max-temp", o->max_temp,
                  "Temporary files SQLite may hold for every request at once (run_sql's sorts, "
                  "GROUP BY and DISTINCT; 1GiB, 500MiB); a statement that would pass it fails, "
                  "saying so")
      ->check(size_validator())
      ->capture_default_str();
  add_serve_options(
      cmd, o->serve,
      "Serve Streamable HTTP at ADDR/mcp instead of stdio: 127.0.0.1:8081, :8081 (loopback), "
      "0.0.0.0:8081 (all interfaces: set a token and TLS)",
      "Environment variable holding the bearer token HTTP clients must send (never a flag)");
  cmd->callback([&ctx, o] { ctx.exit_code = run_mcp(ctx, *o); });
}

}  // namespace ingero::app
