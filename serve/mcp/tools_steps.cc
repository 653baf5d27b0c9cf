// MCP tool for the step model: where each training step's time goes, per GPU process, and the
// steps themselves (first and last few, or the slowest).
#include <algorithm>
#include <sstream>

#include "engine/analysis.h"
#include "engine/chain.h"
#include "engine/loss_notes.h"
#include "engine/result_json.h"
#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput get_step_breakdown(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source);
  if (!w) return error_output(w.error().message);
  size_t limit = size_t(arg_int(call.args, "limit", 10));
  bool slowest = arg_str(call.args, "order") == "slowest";
  engine::EngineOptions eo;
  eo.breakdown = false;
  auto a = engine::analyze(*op->source, *w, eo);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  std::ostringstream t;
  if (std::string lost = engine::losses_line(a.losses); !lost.empty()) t << lost << "\n";
  Json procs = Json::array();
  for (const auto& s : a.steps.processes) {
    Json p = engine::step_series_json(s, a.process_name(s.pid));
    std::vector<const engine::Step*> shown;
    for (const auto& st : s.steps) shown.push_back(&st);
    if (slowest)
      std::stable_sort(shown.begin(), shown.end(),
                       [](auto* x, auto* y) { return x->duration() > y->duration(); });
    size_t omitted = shown.size() > limit ? shown.size() - limit : 0;
    shown.resize(std::min(shown.size(), limit));
    Json steps = Json::array();
    const engine::ProcessKernels* k = a.kernels.find(s.pid);
    for (const auto* st : shown) {
      Json sj = engine::step_json(*st);
      // The kernels launched in it, where the trace names kernels (engine/kernels.h).
      size_t i = size_t(st - s.steps.data());
      if (k && i < k->per_step.size()) {
        Json ks = Json::array();
        for (const auto& [kernel, n] : k->per_step[i])
          ks.push_back({{"name", k->kernels[kernel].label()}, {"launches", n}});
        sj["kernels"] = std::move(ks);
        if (k->partial(i)) sj["kernels_partial"] = true;  // some launches kept no kernel
      }
      steps.push_back(std::move(sj));
    }
    p["steps"] = std::move(steps);
    p["steps_total"] = s.steps.size();
    p["steps_omitted"] = omitted;
    t << ident(a.process_name(s.pid)) << " (pid " << s.pid << "): ";
    if (s.summary.steps)
      t << s.summary.text << " [" << engine::format_count(s.steps.size()) << " steps, "
        << engine::cadence_name(s.cadence) << " cadence]\n";
    else
      t << "no training steps: " << s.cadence_note << "\n";
    procs.push_back(std::move(p));
  }
  if (procs.empty()) t << "no process made GPU calls in this window\n";
  ToolOutput o;
  o.structured = {{"window", window_json(*w, a.span)}, {"processes", procs}};
  if (a.losses) o.structured["losses"] = engine::losses_json(*a.losses);
  o.text = t.str();
  return o;
}

}  // namespace

void add_step_tools(std::vector<Tool>& t) {
  t.push_back(
      {"get_step_breakdown", "Where each training step's time goes",
       "Per GPU process: the training-step cadence found in its calls (a periodic read-back and "
       "sync, or launch bursts; or why none), the median step, and the step split into waiting "
       "for the GPU, enqueueing, other API time and host time; the GPU's busy share as NVML or "
       "amdgpu measured it (gpu_busy, per process where the device reports it; null without "
       "device data), else only the idle share the syncs prove (gpu_idle_lower_bound); the host "
       "gap (GPU idle, no thread in a GPU call) by cause (on-CPU with where, preempted, I/O, "
       "sleeping); where most launches come from. Then the steps themselves (each with its "
       "measured gpu_busy, and the kernels launched in it where the trace names kernels: see "
       "get_kernels): the first `limit`, or the slowest with order=slowest." +
           kDataNote,
       object_schema(with_window(
           {{"pid", pid_prop()},
            {"order",
             {{"type", "string"},
              {"enum", {"time", "slowest"}},
              {"description", "Which steps to list: in time order (default) or slowest first"}}},
            {"limit", limit_prop(10, 200, "steps per process")}})),
       out_schema({{"window", kObj}, {"processes", kArr}, {"losses", kObj}},
                  {"window", "processes"}),
       get_step_breakdown, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp
