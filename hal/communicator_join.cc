#include "hal/communicator_join.h"

namespace ingero::hal {

void CommunicatorJoin::observe(Event& ev) {
  auto communicator = ev.get(Field::kCommunicator);
  if (!communicator || !*communicator) return;
  std::pair<uint32_t, uint64_t> key{ev.pid, *communicator};
  switch (ev.kind) {
    case EventKind::kCommInit: {
      if (ev.has_ret && ev.ret != 0) return;  // no communicator was created
      Info& i = communicators_[key];
      if (auto r = ev.get(Field::kRank)) i.rank = *r, i.has_rank = true;
      if (auto n = ev.get(Field::kNranks)) i.nranks = *n;
      if (auto h = ev.get(Field::kCommHash)) i.hash = *h, i.has_hash = true;
      return;
    }
    case EventKind::kCommDestroy:
      communicators_.erase(key);
      return;
    case EventKind::kCollective:
    case EventKind::kP2P: {
      auto it = communicators_.find(key);
      if (it == communicators_.end()) return;
      if (it->second.has_rank && !ev.has(Field::kRank)) ev.set(Field::kRank, it->second.rank);
      if (it->second.nranks && !ev.has(Field::kNranks)) ev.set(Field::kNranks, it->second.nranks);
      if (it->second.has_hash && !ev.has(Field::kCommHash))
        ev.set(Field::kCommHash, it->second.hash);
      return;
    }
    default:
      return;
  }
}

}  // namespace ingero::hal
