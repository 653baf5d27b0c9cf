// MCP tool for kernel names (engine/kernels.h): the kernels each GPU process launches, most
// launched first, per steady step, and the line that launches them; and what had no name.
#include <algorithm>
#include <sstream>

#include "engine/analysis.h"
#include "engine/loss_notes.h"
#include "engine/result_json.h"
#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput get_kernels(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source);
  if (!w) return error_output(w.error().message);
  size_t limit = size_t(arg_int(call.args, "limit", 20));
  size_t nsteps = size_t(arg_int(call.args, "steps", 5));
  bool slowest = arg_str(call.args, "order") == "slowest";
  engine::EngineOptions eo;
  eo.breakdown = false;
  auto a = engine::analyze(*op->source, *w, eo);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  std::ostringstream t;
  if (std::string lost = engine::losses_line(a.losses); !lost.empty()) t << lost << "\n";
  Json procs = Json::array();
  if (!a.kernels.named)
    t << "no kernel names in this trace (recorded before ingero named kernels, or with "
         "--no-kernel-names)\n";
  if (std::string unnamed = engine::unnamed_kernels_line(a.kernels); !unnamed.empty())
    t << unnamed << "\n";
  for (const auto& p : a.kernels.processes) {
    Json pj = engine::process_kernels_json(p, a.process_name(p.pid), limit);
    pj["kernels_omitted"] = p.kernels.size() > limit ? p.kernels.size() - limit : 0;
    t << ident(a.process_name(p.pid)) << " (pid " << p.pid << "): " << format_count(p.launches)
      << " launches of " << format_count(p.kernels.size()) << " kernels";
    if (p.unnamed_launches)
      t << " (" << format_count(p.unnamed_launches)
        << (p.unnamed_launches == 1 ? " launch of " : " launches of ")
        << format_count(p.unnamed_functions)
        << (p.unnamed_functions == 1 ? " unnamed function)" : " unnamed functions)");
    if (p.folded_launches)
      t << "; " << format_count(p.folded_launches)
        << " older launches folded by tiered retention kept no function";
    if (std::string whole = engine::whole_steps_text(p); !whole.empty())
      t << " (per step: " << whole << ")";
    t << "\n";
    if (std::string per = engine::kernels_per_step_text(p); !per.empty())
      t << "  per step: " << ident(per) << "\n";
    for (size_t i = 0; i < p.kernels.size() && i < limit; ++i) {
      const auto& k = p.kernels[i];
      t << "  " << format_count(k.launches) << " " << ident(k.label());
      if (p.whole_steps) t << " (" << format_count(k.per_step_median) << " per step)";
      if (!k.where.empty()) t << " from " << ident(k.where);
      t << "\n";
    }
    // The steps with their kernels: the first `steps`, or the slowest.
    if (const engine::StepSeries* s = a.steps.find(p.pid); s && nsteps) {
      std::vector<size_t> idx(s->steps.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
      if (slowest)
        std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) {
          return s->steps[x].duration() > s->steps[y].duration();
        });
      if (idx.size() > nsteps) idx.resize(nsteps);
      pj["steps"] = engine::kernel_steps_json(p, *s, idx);
    } else {
      pj["steps"] = Json::array();
    }
    procs.push_back(std::move(pj));
  }
  if (a.kernels.named && procs.empty()) t << "no process launched a kernel in this window\n";
  ToolOutput o;
  Json kj = engine::kernels_json(a, 0);
  kj.erase("processes");
  o.structured = {{"window", window_json(*w, a.span)},
                  {"named", a.kernels.named},
                  {"naming", kj},
                  {"processes", procs}};
  if (a.losses) o.structured["losses"] = engine::losses_json(*a.losses);
  o.text = t.str();
  return o;
}

}  // namespace

void add_kernel_tools(std::vector<Tool>& t) {
  t.push_back(
      {"get_kernels", "Which kernels each process launches, per step and from where",
       "Per GPU process: its kernels by launches (names from the runtime's registration of "
       "kernels, driver look-ups and ELF symbols; a launch whose function has no name is "
       "counted as unnamed, never guessed), each with its launches per steady training step "
       "(median and most) and the line of the user's code that launches it most; then its "
       "steps with the kernels launched in each: the first `steps`, or the slowest with "
       "order=slowest." +
           kDataNote,
       object_schema(with_window(
           {{"pid", pid_prop()},
            {"order",
             {{"type", "string"},
              {"enum", {"time", "slowest"}},
              {"description", "Which steps to list: in time order (default) or slowest first"}}},
            {"limit", limit_prop(20, 500, "kernels per process")},
            {"steps",
             {{"type", "integer"},
              {"minimum", 0},
              {"maximum", 200},
              {"default", 5},
              {"description",
               "Steps per process to list with their kernels (default 5; 0: none)"}}}})),
       out_schema({{"window", kObj},
                   {"named", kBool},
                   {"naming", kObj},
                   {"processes", kArr},
                   {"losses", kObj}},
                  {"window", "named", "naming", "processes"}),
       get_kernels, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp
