// Gathering collectives across nodes: one pass over each node's calls, joining collectives to
// the communicator init of their process (rank, nranks and the unique-id hash) and numbering
// them per communicator, and noting when the host saw each one complete.
#include <algorithm>
#include <set>

#include "engine/fleet.h"
#include "hal/communicator_join.h"

namespace ingero::engine {
namespace {

constexpr size_t kMaxCallsPerRank = 1'000'000;

struct Pending {
  uint64_t hash, rank;
  size_t index;
};

int64_t shift_of(const ClockShift& shift, const std::string& node) {
  auto it = shift.find(node);
  return it == shift.end() ? 0 : it->second;
}

}  // namespace

size_t FleetCommunicator::node_count() const {
  std::set<std::string> nodes;
  for (const auto& [r, fr] : ranks) nodes.insert(fr.node);
  return nodes.size();
}

std::vector<FleetCommunicator> gather_fleet_collectives(TraceSource& source, const Window& w,
                                                        const std::vector<std::string>& nodes,
                                                        const ClockShift& shift) {
  std::map<uint64_t, FleetCommunicator> communicators;
  std::set<std::pair<uint64_t, uint64_t>> conflicted;
  for (const std::string& node : nodes) {
    const int64_t off = shift_of(shift, node);
    Window nw;
    nw.node = node;
    // From the start of the trace: a rank's sequence numbers count from its init.
    if (w.to_ns != std::numeric_limits<int64_t>::max()) nw.to_ns = w.to_ns + off;
    std::map<std::pair<uint32_t, uint64_t>, hal::CommunicatorInit> inits;
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> next_seq;
    std::map<uint32_t, std::vector<Pending>> pending;  // pid -> collectives awaiting a sync
    int64_t node_last = 0;
    std::vector<FleetRank*> touched;
    source.calls(nw, [&](const hal::Event& e) {
      const int64_t ts = int64_t(e.ts_ns) - off, end = ts + int64_t(e.dur_ns);
      node_last = std::max(node_last, end);
      const std::pair<uint32_t, uint64_t> key{e.pid, e.get_or(hal::Field::kCommunicator, 0)};
      if (e.kind == hal::EventKind::kCommInit) {
        inits[key] = hal::CommunicatorInit::of(e);
        next_seq[key] = 0;
        return;
      }
      if (e.kind == hal::EventKind::kSync) {
        auto it = pending.find(e.pid);
        if (it == pending.end()) return;
        auto& list = it->second;
        for (auto p = list.begin(); p != list.end();) {
          RankCall& c = communicators[p->hash].ranks[p->rank].calls[p->index];
          if (c.end <= ts) {
            c.done = end;
            c.synced = true;
            p = list.erase(p);
          } else {
            ++p;
          }
        }
        return;
      }
      if (e.kind != hal::EventKind::kCollective) return;
      auto in = inits.find(key);
      uint64_t hash = e.get_or(hal::Field::kCommHash, in == inits.end() ? 0 : in->second.hash);
      std::optional<uint64_t> rank = e.get(hal::Field::kRank);
      if (!rank && in != inits.end() && in->second.has_rank) rank = in->second.rank;
      if (!hash || !rank) return;  // not matchable across processes
      FleetCommunicator& fc = communicators[hash];
      fc.hash = hash;
      if (fc.api.empty()) fc.vendor = std::string(e.vendor), fc.api = std::string(e.api);
      FleetRank& r = fc.ranks[*rank];
      if (r.node.empty()) {
        r.node = node;
        r.pid = e.pid;
        r.rank = *rank;
        r.nranks = e.get_or(hal::Field::kNranks, in == inits.end() ? 0 : in->second.nranks);
        fc.nranks = std::max(fc.nranks, r.nranks);
        touched.push_back(&r);
      } else if (r.node != node || r.pid != e.pid) {
        if (conflicted.insert({hash, *rank}).second)
          fc.conflicts.push_back("rank " + std::to_string(*rank) + " is claimed by pid " +
                                 std::to_string(r.pid) + " on " + r.node + " and by pid " +
                                 std::to_string(e.pid) + " on " + node);
        return;
      }
      if (r.calls.size() >= kMaxCallsPerRank) return;
      RankCall c;
      c.seq = next_seq[key]++;
      c.op = std::string(e.op);
      c.count = e.get_or(hal::Field::kCount, 0);
      c.datatype = e.get_or(hal::Field::kDatatype, UINT64_MAX);
      c.start = ts;
      c.end = end;
      c.done = end;
      c.tid = e.tid;
      c.in_window = ts >= w.from_ns;
      r.calls.push_back(std::move(c));
      pending[e.pid].push_back({hash, *rank, r.calls.size() - 1});
    });
    for (FleetRank* r : touched) r->node_last_ts = node_last;
  }
  std::vector<FleetCommunicator> out;
  for (auto& [h, c] : communicators) out.push_back(std::move(c));
  return out;
}

}  // namespace ingero::engine
