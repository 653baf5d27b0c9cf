// get_tenants: the analysis per tenant (a Kubernetes pod, a container, or a cgroup): GPU API
// time, preempted time, and who preempted whom across tenants (engine/tenants.h).
#include <sstream>

#include "engine/result_json.h"
#include "engine/tenants.h"
#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput get_tenants(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source, false);
  if (!w) return error_output(w.error().message);
  engine::EngineOptions eo;
  eo.breakdown = false;
  auto a = engine::analyze(*op->source, *w, eo);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  auto g = arg_str(call.args, "group_by") == "container" ? engine::TenantGrouping::kContainer
                                                         : engine::TenantGrouping::kPod;
  engine::TenantReport r = engine::tenant_report(a, g);
  size_t limit = size_t(arg_int(call.args, "limit", 20));
  std::ostringstream t;
  t << format_count(r.tenants.size() + r.tenants_omitted) << " tenants (by "
    << engine::grouping_name(g) << ") in " << window_line(*w, a.span, a.events) << "\n";
  if (!r.named) t << "no pod or container names in this trace: tenants are cgroups\n";
  size_t shown = 0;
  for (const auto& x : r.tenants) {
    if (shown++ >= limit) break;
    t << as_data(x.name, 160) << ": " << format_count(x.calls) << " GPU calls, " << dur(x.api_ns)
      << " in them; GPU threads preempted " << dur(x.preempted_ns) << " ("
      << dur(x.preempted_by_others_ns) << " by other tenants); took " << dur(x.preempting_ns)
      << " from others\n";
  }
  if (r.tenants.size() > limit) t << "(" << r.tenants.size() - limit << " more; raise limit)\n";
  shown = 0;
  for (const auto& x : r.across) {
    if (shown++ >= limit) break;
    t << "  " << as_data(x.victim, 160) << " lost " << dur(x.ns) << " (" << format_count(x.count)
      << (x.count == 1 ? " preemption) to " : " preemptions) to ") << as_data(x.by, 160)
      << ", mostly " << as_data(x.top_comm) << " (pid " << x.top_pid << ")\n";
  }
  Json j = engine::tenants_json(r);
  for (const char* k : {"tenants", "preemptions"}) {
    Json& v = j[k];
    if (v.size() > limit) v.erase(v.begin() + std::ptrdiff_t(limit), v.end());
  }
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"window", window_json(*w, a.span)},
                  {"grouping", j["grouping"]},
                  {"named", j["named"]},
                  {"total", r.tenants.size() + r.tenants_omitted},
                  {"tenants", j["tenants"]},
                  {"preemptions", j["preemptions"]}};
  return o;
}

}  // namespace

void add_tenant_tools(std::vector<Tool>& t) {
  t.push_back(
      {"get_tenants", "Per-tenant breakdown (pods, containers)",
       "The window per tenant: a Kubernetes pod (its containers together; group_by "
       "\"container\" keeps them apart), a container, or a cgroup. For each, its GPU processes, "
       "GPU API calls and the time in them, the involuntary off-CPU time of its GPU threads and "
       "how much of it tasks of other tenants held the CPU for; then who preempted whom across "
       "tenants. Names come from the trace's cgroup_metadata." +
           kDataNote,
       object_schema(
           with_window({{"group_by",
                         {{"type", "string"},
                          {"enum", {"pod", "container"}},
                          {"description", "pod (default) or container"}}},
                        {"limit", limit_prop(20, 100, "tenants and cross-tenant preemptions")}})),
       out_schema({{"window", kObj},
                   {"grouping", kStr},
                   {"named", kBool},
                   {"total", kInt},
                   {"tenants", kArr},
                   {"preemptions", kArr}},
                  {"window", "grouping", "tenants", "preemptions"}),
       get_tenants, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp
