// Renders an engine Analysis: the text incident report `explain` prints and its JSON form
// (also served by MCP tools).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "engine/analysis.h"

namespace ingero::app {

struct ReportOptions {
  std::string title;     // e.g. the trace path
  std::string subtitle;  // e.g. "ingero-go schema 0.8 (read-only)" or "SYNTHETIC DEMO DATA"
  bool per_process = false;
};

void print_report(std::ostream& out, const engine::Analysis& a, const ReportOptions& o);
void print_chain(std::ostream& out, const engine::Chain& c);
nlohmann::json report_json(const engine::Analysis& a, const ReportOptions& o);
nlohmann::json chain_json(const engine::Chain& c);
nlohmann::json op_stats_json(const engine::OpStats& s);
// A process of the per-process breakdown, without its ops (each caller lists those its way).
nlohmann::json process_json(const engine::ProcessReport& p);
std::string format_wall(int64_t ns);  // "2026-03-20 13:52:53 UTC"

}  // namespace ingero::app
