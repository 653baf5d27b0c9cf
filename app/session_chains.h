// After a trace: name the cgroups seen, and store the session's causal chains (derived by
// the engine from what was just written) in causal_chains.
#pragma once

#include <string>

#include "engine/analysis.h"
#include "kernelside/tenant_names.h"
#include "store/trace_writer.h"

namespace ingero::app {

// A resolved cgroup as cgroup_metadata stores it.
store::CgroupRow cgroup_row(const kernelside::CgroupTenant& t);

// The engine options of the tracer's own analyses (the session's end, the live chains): the
// step model is given the last whole seconds holding at most 1,000,000 calls, in at most 16 MB
// (12 bytes a grouped call), so that the tracer's peak memory does not grow with the session
// (docs/performance.md). `explain` models the whole window.
engine::EngineOptions tracer_engine_options();

// Records the cgroups of this session's events that `tenants` has not named yet (their
// processes gone: found by walking the hierarchy, with their layout and the runtime's names),
// then runs the engine over the session's window (tracer_engine_options) and replaces the
// session's chains, detected at `to_ns` (its end, on its clock). Returns the number of chains;
// `chains`, when given, receives them (the OTLP exporter's last log records).
ingero::Result<size_t> store_session_chains(store::TraceWriter& writer, const std::string& db_path,
                                            const std::string& node, int64_t from_ns, int64_t to_ns,
                                            kernelside::TenantResolver& tenants,
                                            std::vector<engine::Chain>* chains = nullptr);

store::ChainRow chain_row(const engine::Chain& c, const std::string& node, int64_t detected_at);

}  // namespace ingero::app
