#include "app/session_chains.h"

#include <malloc.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "app/builtin_backends.h"
#include "engine/json_text.h"
#include "store/sql_trace_source.h"

namespace ingero::app {

namespace {
// The session's end keeps a copy of the calls for its analysis's passes up to this size. At
// 16 MiB the end of 800,000 calls at full rate peaked at 69-75 MiB, above the tracer's 64 MiB
// target; at 8 MiB, 56-67 MiB, its analysis ~0.15 s slower for reading the file at each pass
// (docs/performance.md, "The end's copy of the calls, 8 MiB").
constexpr size_t kSessionCallCacheBytes = size_t(8) << 20;
}  // namespace

engine::EngineOptions tracer_engine_options() {
  engine::EngineOptions eo;
  eo.breakdown = false;
  eo.model_bytes = 16'000'000;
  eo.model_calls = 1'000'000;
  return eo;
}

store::CgroupRow cgroup_row(const kernelside::CgroupTenant& t) {
  store::CgroupRow r;
  r.cgroup_id = t.id;
  r.path = t.path;
  r.container_id = t.layout.container_id;
  r.pod = t.names.pod;
  r.pod_namespace = t.names.pod_namespace;
  r.container = t.names.container;
  auto text = [](std::string_view v) {
    return v.empty() ? std::nullopt : std::optional<std::string>(v);
  };
  r.pod_uid = text(t.layout.pod_uid);
  r.qos = text(kernelside::qos_name(t.layout.qos));
  r.runtime = text(t.layout.runtime);
  r.names_from = text(t.names.from);
  return r;
}

store::ChainRow chain_row(const engine::Chain& c, const std::string& node, int64_t detected_at) {
  store::ChainRow r;
  r.id = (node.empty() ? "" : node + ":") + c.id;
  r.severity = engine::severity_name(c.severity);
  r.summary = c.summary;
  r.root_cause = c.root_cause;
  r.explanation = c.explanation;
  r.recommendations_json = engine::json_text(c.fixes);
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& t : c.timeline)
    tl.push_back({{"layer", t.layer}, {"op", t.op}, {"detail", t.detail}, {"dur_us", t.dur_us}});
  r.timeline_json = engine::json_text(tl);
  r.pids_json = engine::json_text(c.pids);
  r.op = c.op;
  r.rule = c.rule;
  r.vendor = c.vendor;
  r.api = c.api;
  r.detected_at_ns = detected_at;
  r.p99_us = int64_t(c.p99_ns / 1000);
  r.p50_us = int64_t(c.p50_ns / 1000);
  r.tail_ratio = c.tail_ratio;
  r.window_start_ns = c.window_start;
  r.window_end_ns = c.window_end;
  return r;
}

ingero::Result<size_t> store_session_chains(store::TraceWriter& writer, const std::string& db_path,
                                            const std::string& node, int64_t from_ns, int64_t to_ns,
                                            kernelside::TenantResolver& tenants,
                                            std::vector<engine::Chain>* chains) {
  // Every block in memory goes in, and every second's summary: the analysis reads the file,
  // and the command and the rings are done (a late call starts a second row for its second).
  // Summaries left out would be derived again from the blocks by every read of the analysis
  // (store/unsummarised_calls.h).
  if (auto st = writer.summarise_before(INT64_MAX); !st) return st.error();
  auto reader = store::TraceReader::open(db_path, builtin_views(), builtin_error_codes());
  if (!reader) return reader.error();
  // Name the cgroups this session saw (the writer kept them as events came: no block is read).
  const std::set<uint64_t>& ids = writer.session_cgroups();
  // Those the tracer named while they ran are stored; the others are found in the hierarchy
  // (walked only if there are some: a large host has thousands of cgroups).
  std::vector<uint64_t> unnamed;
  for (uint64_t id : ids)
    if (auto t = tenants.find(id); id && (!t || t->path.empty())) unnamed.push_back(id);
  if (!unnamed.empty()) {
    auto paths = kernelside::walk_cgroup_paths(tenants.cgroup_root());
    for (uint64_t id : unnamed)
      if (auto p = paths.find(id); p != paths.end())
        if (auto st = writer.add_cgroup(cgroup_row(tenants.resolve_path(id, p->second))); !st)
          return st.error();
  }
  if (auto st = writer.commit(); !st) return st.error();
  // The writer's page cache (8 MiB while tracing) and its blocks kept for reuse are not needed
  // for the few rows left to write: handed back before the analysis, the session's peak memory
  // is not their sum.
  writer.release_memory();
  malloc_trim(0);  // and what tracing freed goes back to the system, not only to malloc
  store::SqlTraceSource source(**reader);
  // A small copy of the calls (~34 bytes each): the analysis of a short session reads the
  // file once; a long one is read pass by pass and the tracer's memory stays bounded.
  source.set_call_cache(kSessionCallCacheBytes);
  engine::Window w;
  w.from_ns = from_ns;
  w.to_ns = to_ns;
  if (!node.empty()) w.node = node;
  engine::Analysis a = engine::analyze(source, w, tracer_engine_options());
  if (!source.error().empty()) return ingero::make_error(source.error());
  std::vector<store::ChainRow> rows;
  // Found at the session's end, on its clock (a wall clock stepped while tracing would put them
  // outside it).
  for (const auto& c : a.chains) rows.push_back(chain_row(c, node, to_ns));
  if (auto st = writer.replace_chains(rows); !st) return st.error();
  if (auto st = writer.commit(); !st) return st.error();
  if (chains) *chains = std::move(a.chains);
  return rows.size();
}

}  // namespace ingero::app
