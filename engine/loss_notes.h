// What a trace lost, in one wording for every reader: explain's losses line, the report's
// warnings, the MCP tools' text, the tracer's last lines on stderr.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::engine {

struct LossNote {
  // A count the trace gives is wrong without it (calls or events missing): an error; else a
  // notice (stacks, samples, what retention deleted by policy, libraries attached late).
  bool error = false;
  std::string text;
};

// One note per kind of loss (calls, stacks, host events, samples, store errors, retention, late
// libraries); none when nothing was lost.
std::vector<LossNote> loss_notes(const TraceLosses& l);

// The notes on one line, joined by "; " (empty when nothing was lost).
std::string losses_line(const std::optional<TraceLosses>& l);

struct HostContext;
// Off-CPU intervals past the cap (HostContext::offcpu_dropped, only when some were not kept):
// which were kept, how many were not, and what they are missing from.
std::string offcpu_kept_line(const HostContext& h);

}  // namespace ingero::engine
