// The page's assets, embedded at build time by embed_assets.cmake from web/ and the pinned
// npm packages in web/node_modules (uPlot, d3-flame-graph and the d3 modules it uses).
#pragma once

#include <string_view>

namespace ingero::serve::report::assets {

// web/report.html, with the placeholders report_html.cc fills.
extern const std::string_view kTemplate;
// Vendor CSS, then web/report.css.
extern const std::string_view kStyle;
// Vendor JavaScript (each library's minified browser build), then web/js/*.js inside one
// strict-mode function.
extern const std::string_view kScript;
// "uplot 1.6.32, d3-flame-graph 5.0.0, d3-selection 3.0.1": the pinned versions.
extern const std::string_view kLibraries;

}  // namespace ingero::serve::report::assets
