// Joins collectives to the communicator they run on. Init calls return the communicator
// handle (an output pointer) with rank, nranks and the unique-id hash; later calls carry only
// the handle. Vendor-neutral: it works on Event fields, for NCCL and RCCL alike.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "hal/event.h"

namespace ingero::hal {

// What a communicator's init said of it: the unique id's hash, how many ranks, and this
// process's rank, each where the init gave it. Read by the join below, the live in-flight view
// and the fleet's matching of collectives across nodes, which must agree.
struct CommunicatorInit {
  uint64_t hash = 0, nranks = 0, rank = 0;
  bool has_hash = false, has_rank = false;
  static CommunicatorInit of(const Event& init);
  // Gives a later call on the communicator what it does not carry itself.
  void fill(Event& ev) const;
};

class CommunicatorJoin {
 public:
  // Learns from comm_init events; fills rank/nranks/comm_hash into later calls on the same
  // (pid, communicator). Forgets on comm_destroy.
  void observe(Event& ev);
  size_t size() const { return communicators_.size(); }

 private:
  std::map<std::pair<uint32_t, uint64_t>, CommunicatorInit> communicators_;
};

}  // namespace ingero::hal
