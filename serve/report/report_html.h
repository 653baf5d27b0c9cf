// The page: web/report.html with the embedded stylesheet and script and, for the one-file
// report, the model as JSON. The same page serves the dashboard, where it holds no data and
// fetches the model from the server instead.
//
// Safety: the data travels as JSON in a non-executable <script type="application/json">
// with every '<' escaped, so no string from a trace (a process name, a path) can end the
// element or become markup; the script builds the DOM with textContent only. A
// Content-Security-Policy allows exactly the one inline script (by its SHA-256), no network
// for the file report and only the page's own origin for the dashboard.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ingero::serve::report {

// The self-contained report of `model` (build_report's), titled `title`.
std::string render_report_html(const nlohmann::json& model, const std::string& title);

struct LivePage {
  std::string title;               // shown until the first model arrives
  std::string api = "api/report";  // relative to the page
  int refresh_ms = 3000;
};
// The dashboard's page: no data; the script polls `api`.
std::string render_dashboard_html(const LivePage& page);

// The Content-Security-Policy the dashboard sends with its page.
std::string dashboard_csp();

// JSON for embedding in HTML: every '<' becomes \u003c (JSON-equivalent), invalid UTF-8 is
// replaced.
std::string json_for_html(const nlohmann::json& j);

}  // namespace ingero::serve::report
