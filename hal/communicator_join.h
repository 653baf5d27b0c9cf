// Joins collectives to the communicator they run on. Init calls return the communicator
// handle (an output pointer) with rank, nranks and the unique-id hash; later calls carry only
// the handle. Vendor-neutral: it works on Event fields, for NCCL and RCCL alike.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "hal/event.h"

namespace ingero::hal {

class CommunicatorJoin {
 public:
  // Learns from comm_init events; fills rank/nranks/comm_hash into later calls on the same
  // (pid, communicator). Forgets on comm_destroy.
  void observe(Event& ev);
  size_t size() const { return communicators_.size(); }

 private:
  struct Info {
    uint64_t rank = 0, nranks = 0, hash = 0;
    bool has_rank = false, has_hash = false;
  };
  std::map<std::pair<uint32_t, uint64_t>, Info> communicators_;
};

}  // namespace ingero::hal
