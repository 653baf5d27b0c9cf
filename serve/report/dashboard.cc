#include "serve/report/dashboard.h"

#include "serve/report/report_html.h"

namespace ingero::serve::report {

Dashboard::Dashboard(DashboardOptions options)
    : options_(std::move(options)),
      cache_(
          options_.db_path,
          [this]() -> Result<std::string> {
            auto model = options_.compute();
            if (!model) return model.error();
            return model->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          },
          options_.refresh) {
  LivePage p;
  p.title = options_.title;
  p.refresh_ms = int(options_.refresh.count());
  page_html_ = render_dashboard_html(p);
}

Dashboard::~Dashboard() { stop(); }

http::Response Dashboard::page() const {
  http::Response r;
  r.headers.set("Content-Type", "text/html; charset=utf-8");
  r.headers.set("Content-Security-Policy", dashboard_csp());
  r.headers.set("Referrer-Policy", "no-referrer");
  r.headers.set("X-Frame-Options", "DENY");
  r.body = page_html_;
  return r;
}

http::Response Dashboard::report(const http::Request& req) {
  ReportCache::Entry e = cache_.get();
  if (!e.ok) {
    http::Response r = http::Response::json(503, *e.body);
    r.headers.set("Retry-After",
                  std::to_string(std::max<long>(1, options_.refresh.count() / 1000)));
    return r;
  }
  if (req.headers.value("If-None-Match") == e.etag) {
    http::Response r;
    r.status = 304;
    r.headers.set("ETag", e.etag);
    return r;
  }
  http::Response r = http::Response::json(200, *e.body);
  r.headers.set("ETag", e.etag);
  r.headers.set("Cache-Control", "no-cache");
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", e.compute_s);
  r.headers.set("X-Ingero-Compute-Seconds", secs);
  return r;
}

Status Dashboard::start() {
  server_ = std::make_unique<http::Server>(options_.server);
  http::RouteOptions page_opts;
  page_opts.run_on = http::RunOn::io_thread;
  page_opts.public_route = true;  // holds no trace data; the token guards /api/report
  server_->route(
      "GET", "/", [this](const http::Request&) { return page(); }, page_opts);
  server_->route("GET", "/api/report", [this](const http::Request& req) { return report(req); });
  return server_->start();
}

std::string Dashboard::url() const { return server_ ? server_->url("/") : ""; }
bool Dashboard::loopback_only() const { return server_ && server_->loopback_only(); }
http::Stats Dashboard::stats() const { return server_ ? server_->stats() : http::Stats{}; }
uint64_t Dashboard::computations() const { return cache_.computations(); }

void Dashboard::stop() {
  if (server_) server_->stop();
}

}  // namespace ingero::serve::report
