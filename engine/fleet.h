// Across nodes: what only a fleet store (or a merged trace) can show.
//
//  - Collectives of one communicator are matched across ranks on every node by (comm hash,
//    sequence number): the n-th collective a rank issued on a communicator since joining it.
//  - Clocks: each node's offset is estimated from the completions of those collectives, which
//    all ranks see at nearly the same instant (a collective ends when its last rank arrives),
//    and removed from every timestamp before anything is compared (fleet_clock.cc).
//  - Rules: the straggler rank with its node and host cause, the first collective where ranks
//    disagree (op, count, datatype, or one never issued it), and the node whose step time or
//    launch rate is an outlier (median absolute deviation).
//
// The engine reads node by node (Window::node), so pids may collide across nodes. Sources
// that apply clock offsets themselves (ClickHouse: at query time, in the SELECT) are read as
// they are; for others a ClockShift is passed and the engine applies it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/analysis.h"
#include "engine/chain.h"
#include "engine/trace_source.h"

namespace ingero::engine {

// node -> offset (ns) to subtract from the node's timestamps; empty when the source applies it.
using ClockShift = std::map<std::string, int64_t>;

// One collective call of one rank.
struct RankCall {
  uint64_t seq = 0;  // its position among the rank's collectives on the communicator
  std::string op;
  uint64_t count = 0, datatype = UINT64_MAX;
  int64_t start = 0, end = 0;
  // When the host saw it complete: the end of the first sync of the same process after it
  // (the host waits there for the device), else the call's own end.
  int64_t done = 0;
  bool synced = false;  // `done` is a sync's end (else the call's own end)
  uint32_t tid = 0;
  bool in_window = true;  // read from before the window only to number the sequence
};

struct FleetRank {
  std::string node;
  uint64_t rank = 0, nranks = 0;
  uint32_t pid = 0;
  std::vector<RankCall> calls;  // in issue order, capped
  int64_t node_last_ts = 0;     // the node's last call in the window: its trace went on until then
};

struct FleetCommunicator {
  uint64_t hash = 0;  // the unique id's hash: the same on every rank
  uint64_t nranks = 0;
  std::string vendor, api;              // of its collectives ("nvidia"/"nccl", "amd"/"rccl")
  std::map<uint64_t, FleetRank> ranks;  // by rank
  std::vector<std::string> conflicts;   // a rank number claimed by two processes
  size_t node_count() const;
};

// Reads every node's calls in the window (and before it, to number the sequences) and groups
// collectives by communicator hash. Only collectives whose communicator init was seen (it
// carries the hash and rank) can be matched across nodes.
std::vector<FleetCommunicator> gather_fleet_collectives(TraceSource& source, const Window& w,
                                                        const std::vector<std::string>& nodes,
                                                        const ClockShift& shift = {});

struct NodeClock {
  std::string node;
  int64_t offset_ns = 0;  // this node's clock minus the reference clock
  int64_t error_ns = 0;   // bound on the estimate (see fleet_clock.cc); 0 when not estimated
  size_t samples = 0;     // collectives whose completion was compared
  bool reference = false;
  std::string method;  // how it was estimated, or why it was not
};

// Offsets from collective completions (the end of the first sync after each collective): per
// node, the median over shared collectives of its completion time minus the reference node's; then
// centred on the median node, so that a majority of agreeing nodes keeps offset 0 and the odd one
// carries the skew.
std::vector<NodeClock> estimate_clock_offsets(const std::vector<FleetCommunicator>& communicators,
                                              const std::vector<std::string>& nodes);
ClockShift clock_shift(const std::vector<NodeClock>& clocks);

// One node's aggregate behaviour, for the outlier rule.
struct NodeProfile {
  std::string node;
  uint64_t step_ns = 0;    // median steady step time of its GPU processes (0: no steps)
  double launch_rate = 0;  // kernel launches per second over its span
  size_t gpu_processes = 0;
};

struct FleetAnalysis {
  std::vector<std::string> nodes;
  std::vector<NodeClock> clocks;
  std::vector<NodeProfile> profiles;
  std::vector<Chain> chains;  // HIGH first
  size_t communicators = 0, cross_node_communicators = 0;
};

// `per_node`: each node's own analysis (its host context and steps are the evidence).
// `shift`: clock offsets the engine must apply itself (empty when the source applies them).
FleetAnalysis analyze_fleet(TraceSource& source, const Window& w,
                            const std::vector<std::string>& nodes,
                            const std::map<std::string, const Analysis*>& per_node,
                            std::vector<NodeClock> clocks, const ClockShift& shift = {});

// Rule families, exposed for tests.
void rule_fleet_straggler(const std::vector<FleetCommunicator>& communicators,
                          const std::map<std::string, const Analysis*>& per_node,
                          const ClockShift& shift, const std::vector<NodeClock>& clocks,
                          std::vector<Chain>& out);
void rule_mismatched_collectives(const std::vector<FleetCommunicator>& communicators,
                                 std::vector<Chain>& out);
std::vector<NodeProfile> node_profiles(const std::map<std::string, const Analysis*>& per_node);
void rule_node_outliers(const std::vector<NodeProfile>& profiles, std::vector<Chain>& out);

}  // namespace ingero::engine
