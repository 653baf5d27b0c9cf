// `ingero dashboard`: the report's views, live, over HTTP (serve/http), for a trace file that
// `ingero trace` may still be writing.
//
// Routes:
//   GET /            the page (no trace data in it; public, so a browser can load it before it
//                    has a token). Content-Security-Policy: the one inline script, connections
//                    to this origin only, no framing.
//   GET /api/report  the model (report_model.h) as JSON, from the ReportCache: computed on a
//                    worker, once per change of the file, shared by every tab. ETag /
//                    If-None-Match: an unchanged model costs a 304. A model that cannot be
//                    built (file missing, foreign, unreadable) is 503 with {"error": ...}.
// Every route passes serve/http's checks: Host/Origin (DNS rebinding), the bearer token when
// one is set (on /api/report), limits and deadlines. docs/security.md lists the promises.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "hal/result.h"
#include "serve/http/server.h"
#include "serve/report/report_cache.h"

namespace ingero::serve::report {

struct DashboardOptions {
  std::string db_path;  // the trace file: its changes drive recomputation
  std::string title;    // shown in the page
  http::ServerOptions server;
  std::chrono::milliseconds refresh{3000};  // the page's poll interval and the cache's min age
  // Builds the model from the file (opened afresh each time); called on a worker thread.
  std::function<Result<nlohmann::json>()> compute;
};

class Dashboard {
 public:
  explicit Dashboard(DashboardOptions options);
  ~Dashboard();
  // Starts the server (a busy port or bad TLS files are Errors naming them).
  Status start();
  std::string url() const;  // "http://127.0.0.1:8080/"
  bool loopback_only() const;
  http::Stats stats() const;
  uint64_t computations() const;  // models built so far
  void stop();

 private:
  http::Response page() const;
  http::Response report(const http::Request& req);

  DashboardOptions options_;
  std::string page_html_;
  ReportCache cache_;
  std::unique_ptr<http::Server> server_;
};

}  // namespace ingero::serve::report
