// `ingero dashboard`: the report's views, live, over HTTP, for a trace that may still be
// being written. The server, its security rules and its flags are those of `ingero mcp
// --http` (serve/http): loopback by default, a bearer token from the environment, Host and
// Origin checks, TLS.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <thread>

#include "app/commands.h"
#include "app/read_error.h"
#include "app/report_file.h"
#include "app/serve_options.h"
#include "app/window_flags.h"
#include "engine/window_spec.h"
#include "serve/http/auth.h"
#include "serve/report/dashboard.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace ingero::app {

namespace {

std::atomic<bool> g_dashboard_stop{false};
void on_dashboard_signal(int) { g_dashboard_stop = true; }
// How long a stop waits for a report being built (the connections' own grace is 1 s).
constexpr std::chrono::seconds kStopGrace{3};

struct DashboardOpts {
  std::string db = default_db_path();
  ServeOptions serve = serve_options("127.0.0.1:8080", "INGERO_DASHBOARD_TOKEN");
  double refresh_s = 3;
  engine::WindowSpec w;
};

Result<serve::http::ServerOptions> server_options(const ServeOptions& o, std::string* token) {
  serve::http::ServerOptions s;
  s.listen = o.http;
  if (o.tls_cert.empty() != o.tls_key.empty())
    return make_error("--tls-cert and --tls-key go together");
  if (!o.tls_cert.empty()) {
    serve::http::TlsOptions tls;
    tls.cert_file = o.tls_cert;
    tls.key_file = o.tls_key;
    s.tls = tls;
  }
  s.hosts.allow_hosts = o.allow_hosts;
  s.hosts.allow_origins = o.allow_origins;
  s.workers = o.threads;
  auto given = o.token();
  if (!given) return given.error();
  if (const std::string& t = *given; !t.empty()) {
    auto auth = serve::http::BearerAuth::create({{"default", t}});
    if (!auth) return make_error("$" + o.token_env + ": " + auth.error().message);
    s.auth = *auth;
    *token = t;
  }
  return s;
}

int run_dashboard(const DashboardOpts& o) {
  if (auto st = engine::check_window_spec(o.w); !st) {
    std::cerr << "ingero dashboard: " << st.error().message << "\n";
    return kExitUsage;
  }
  // A foreign or corrupt file is refused now, rather than shown as an error in every poll. A
  // missing or still empty file is waited for: `ingero trace` may be about to create it.
  bool waiting = access(o.db.c_str(), F_OK) != 0;
  if (!waiting) {
    auto db = store::Db::open(o.db, store::Db::Mode::kReadOnly);
    auto info = db ? store::inspect(**db) : Result<store::TraceFileInfo>(db.error());
    if (!info) {
      std::cerr << "ingero dashboard: " << file_error(o.db, info.error().message) << "\n";
      return kExitFailure;
    }
    waiting = info->format == store::TraceFormat::kEmpty;
  }
  if (waiting)
    std::cerr << "ingero dashboard: " << o.db
              << " is not a trace yet: the page will show the report once it is\n";
  std::string token;
  auto so = server_options(o.serve, &token);
  if (!so) {
    std::cerr << "ingero dashboard: " << so.error().message << "\n";
    return kExitUsage;
  }
  serve::report::DashboardOptions d;
  d.db_path = o.db;
  d.title = o.db;
  d.server = std::move(*so);
  d.refresh = std::chrono::milliseconds(int64_t(o.refresh_s * 1000));
  d.compute = [path = o.db, w = o.w] {
    // Test-only: INGERO_TEST_REPORT_PAUSE_MS makes every report this long to build (a stop
    // during one is what the test looks at).
    if (const char* pause = getenv("INGERO_TEST_REPORT_PAUSE_MS"))
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(pause)));
    return build_report_model(path, w, path);
  };
  serve::report::Dashboard dash(std::move(d));
  if (auto st = dash.start(); !st) {
    std::cerr << "ingero dashboard: " << st.error().message << "\n";
    return kExitUsage;
  }
  struct sigaction sa {};
  sa.sa_handler = on_dashboard_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal: stop as for the others (it was rc 129)
  signal(SIGPIPE, SIG_IGN);
  std::cerr << "ingero dashboard: serving " << o.db << " at " << dash.url() << " (refresh every "
            << o.refresh_s << " s; "
            << (token.empty() ? "no token: set " + o.serve.token_env + " to require one"
                              : "bearer token required: open " + dash.url() + "#token=<$" +
                                    o.serve.token_env + ">")
            << ")" << std::endl;
  std::cerr << exposure_warning("ingero dashboard", o.serve, dash.loopback_only(), !token.empty());
  while (!g_dashboard_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cerr << "ingero dashboard: stopping\n";
  // A report being built cannot be interrupted; the stop waited for it (14 s on a large
  // trace, past a service manager's patience). It reads only: after kStopGrace it is left
  // unfinished and the process ends.
  std::promise<void> stopped;
  auto done = stopped.get_future();
  std::thread stopper([&dash, &stopped] {
    dash.stop();
    stopped.set_value();
  });
  if (done.wait_for(kStopGrace) != std::future_status::ready) {
    std::cerr << "ingero dashboard: stopped with a report still being built (left unfinished)"
              << std::endl;
    std::_Exit(kExitOk);
  }
  stopper.join();
  return kExitOk;
}

}  // namespace

void add_dashboard_command(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<DashboardOpts>();
  auto* cmd = app.add_subcommand(
      "dashboard",
      "Serve the report's views live over HTTP for a trace file, also while `ingero trace` is\n"
      "writing it: the page refreshes every few seconds. Loopback only unless told otherwise;\n"
      "the bearer token comes from the environment (--token-env).");
  cmd->add_option("--db,-d", o->db, "Trace file (ours or the original implementation's), read-only")
      ->capture_default_str()
      ->check(path_given());
  add_serve_options(cmd, o->serve,
                    "Listen address: 127.0.0.1:8080, :8080 (loopback), 0.0.0.0:8080 (all "
                    "interfaces: set a token and TLS); port 0 picks a free port",
                    "Environment variable holding the bearer token the page's API requires (never "
                    "a flag); the browser passes it as URL#token=TOKEN");
  cmd->add_option("--refresh", o->refresh_s,
                  "Seconds between the page's refreshes; the report is rebuilt at most this often")
      ->check(CLI::Range(0.5, 3600.0))
      ->capture_default_str();
  add_window_flags(*cmd, o->w, "Only the last 30s / 5m / 1h of the trace (sliding)");
  cmd->callback([&ctx, o] { ctx.exit_code = run_dashboard(*o); });
}

}  // namespace ingero::app
