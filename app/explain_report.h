// Renders an engine Analysis: the text incident report `explain` prints (its JSON form is
// engine/result_json.h).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "engine/analysis.h"
#include "engine/result_json.h"

namespace ingero::app {

using ReportOptions = engine::ReportHeader;

void print_report(std::ostream& out, const engine::Analysis& a, const ReportOptions& o);
using engine::chain_json;
using engine::format_wall;
using engine::op_stats_json;
using engine::process_json;
using engine::report_json;
// One chain as the text report prints it.
void print_chain(std::ostream& out, const engine::Chain& c);
// The CAUSAL CHAINS section: its header, each chain, and unless `all`, the tails with no
// host-side cause folded into one line under the others (folded_tails_line).
void print_chains(std::ostream& out, const std::vector<engine::Chain>& chains, bool all);
// "6 ops have tail latency with no host-side cause: cuLaunchKernel p99 1.1ms, ..., cuMemAlloc
// p99 360us (warm-up); explain --all-chains shows each"; "" for none.
std::string folded_tails_line(const std::vector<const engine::Chain*>& tails);

}  // namespace ingero::app
