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

// Records cgroup paths for the ids in this session's events, then runs the engine over the
// session's window and replaces the session's chains. Returns the number of chains.
ingero::Result<size_t> store_session_chains(store::TraceWriter& writer, const std::string& db_path,
                                            const std::string& node, int64_t from_ns,
                                            int64_t to_ns);

store::ChainRow chain_row(const engine::Chain& c, const std::string& node, int64_t detected_at);

}  // namespace ingero::app
