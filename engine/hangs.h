// Hangs, named while they last. A call is stored when it returns and a hung one never does;
// what the engine knows of a hang comes from the tracer's observations of stuck threads
// (TraceSource::inflight, hal/inflight.h):
//  - hung_call: a traced call in flight for longer than the tracer's --inflight-after, with
//    where it was called from and what its thread and its process's other threads do;
//  - collective_hang: ranks inside collective N of a communicator, for how long, and the
//    ranks that never entered it, with their node and what their thread does now (the call it
//    is stuck in, or where it sits outside any call; else its latest on-CPU samples).
// Collectives are matched by their sequence number on the communicator (engine/fleet.h): the
// tracer numbers a collective in flight as the engine numbers stored ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "engine/fleet.h"
#include "engine/trace_source.h"

namespace ingero::engine {

struct Analysis;

// One rank of a hung collective.
struct HangRank {
  uint64_t rank = 0;
  std::string node;
  uint32_t pid = 0, tid = 0;
  bool inside = false;               // waiting inside the collective
  uint64_t completed = hal::kNoSeq;  // collectives it completed on the communicator
  const InflightRow* now = nullptr;  // its thread's stuck call or idle episode (null: none)
  int64_t last_call_end = 0;         // not inside, no row: its last collective's end (0 unknown)
};

struct CollectiveHang {
  uint64_t comm_hash = 0, nranks = 0, seq = 0;
  std::string vendor, api, op;
  std::vector<HangRank> ranks;   // every rank known, by rank
  std::vector<uint64_t> unseen;  // ranks below nranks that nothing recorded
  int64_t entered_ns = 0;        // the first rank's entry
  int64_t longest_ns = 0;        // the longest wait inside
  int64_t seen_ns = 0;           // the latest observation
  bool ongoing = false;          // a rank is still inside (in_flight)
  size_t inside() const;
  // Not inside, and past it: it completed the collective (read after it left).
  bool passed(const HangRank& r) const;
  std::vector<const HangRank*> missing() const;  // ranks not inside and not past it
};

// Collectives ranks wait in for longer than `after_ns`, grouped by (communicator, sequence
// number); one every rank inside has left (returned) is no hang. `communicators`
// (gather_fleet_collectives, may be empty) places ranks that have no row: their node, pid and the
// collectives they completed.
std::vector<CollectiveHang> find_collective_hangs(
    const std::vector<InflightRow>& rows, const std::vector<FleetCommunicator>& communicators,
    uint64_t after_ns = 0);

// Where a stack is: the innermost Python frame ("train.py:88"), else the innermost native
// frame with a name ("step at t.c:41", "step"); "" when none.
std::string stack_location(const std::vector<StackFrameInfo>& frames);
// How long, as people read a hang: "312 s", "4.2 s", "18 min 3 s".
std::string hang_duration(int64_t ns);
// One line about a stuck thread, e.g. "python3 (pid 4411) has been inside
// `cudaStreamSynchronize` for 312 s at train.py:88; its other threads are asleep". `waited_ns`:
// how long (from now, for a live trace; else the row's own).
std::string hang_line(const InflightRow& r, const std::string& process,
                      const std::vector<StackFrameInfo>& stack, int64_t waited_ns);
// What the other threads of its process do: "its other threads are asleep", ...
std::string others_text(const hal::Inflight& in);

// The chains of a node's analysis: hung calls, and collective hangs its own ranks show.
void rule_hangs(TraceSource& source, Analysis& a, std::vector<Chain>& out);
// Across nodes: collective hangs over every node's rows and collectives.
void rule_fleet_hangs(TraceSource& source, const std::vector<FleetCommunicator>& communicators,
                      const std::vector<InflightRow>& rows, std::vector<Chain>& out);
// The chain of one collective hang (exposed for tests and the tracer's live analysis).
Chain collective_hang_chain(TraceSource* source, const CollectiveHang& h,
                            const std::map<std::string, std::map<uint32_t, std::string>>& names);

}  // namespace ingero::engine
