// After a trace: name the cgroups seen, and store the session's causal chains (derived by
// the engine from what was just written) in causal_chains.
#pragma once

#include <string>

#include "engine/analysis.h"
#include "store/trace_writer.h"

namespace ingero::app {

// cgroup v2 id -> path (relative to the mount), by walking the hierarchy: the id is the
// directory's inode number.
std::map<uint64_t, std::string> cgroup_paths(const std::string& root = "/sys/fs/cgroup");

// The engine options of the tracer's own analyses (the session's end, the live chains): the
// step model is given the last whole seconds holding at most 1,000,000 calls, in at most 16 MB
// (12 bytes a grouped call), so that the tracer's peak memory does not grow with the session
// (docs/performance.md). `explain` models the whole window.
engine::EngineOptions tracer_engine_options();

// Records cgroup paths for the ids in this session's events, then runs the engine over the
// session's window (tracer_engine_options) and replaces the session's chains. Returns the
// number of chains; `chains`, when given, receives them (the OTLP exporter's last log records).
ingero::Result<size_t> store_session_chains(store::TraceWriter& writer, const std::string& db_path,
                                            const std::string& node, int64_t from_ns, int64_t to_ns,
                                            std::vector<engine::Chain>* chains = nullptr);

store::ChainRow chain_row(const engine::Chain& c, const std::string& node, int64_t detected_at);

}  // namespace ingero::app
