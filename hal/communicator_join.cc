#include "hal/communicator_join.h"

namespace ingero::hal {

CommunicatorInit CommunicatorInit::of(const Event& init) {
  CommunicatorInit c;
  if (auto h = init.get(Field::kCommHash)) c.hash = *h, c.has_hash = true;
  if (auto n = init.get(Field::kNranks)) c.nranks = *n;
  if (auto r = init.get(Field::kRank)) c.rank = *r, c.has_rank = true;
  return c;
}

void CommunicatorInit::fill(Event& ev) const {
  if (has_hash && hash && !ev.has(Field::kCommHash)) ev.set(Field::kCommHash, hash);
  if (has_rank && !ev.has(Field::kRank)) ev.set(Field::kRank, rank);
  if (nranks && !ev.has(Field::kNranks)) ev.set(Field::kNranks, nranks);
}

void CommunicatorJoin::observe(Event& ev) {
  auto communicator = ev.get(Field::kCommunicator);
  if (!communicator || !*communicator) return;
  std::pair<uint32_t, uint64_t> key{ev.pid, *communicator};
  switch (ev.kind) {
    case EventKind::kCommInit: {
      if (ev.has_ret && ev.ret != 0) return;  // no communicator was created
      communicators_[key] = CommunicatorInit::of(ev);
      return;
    }
    case EventKind::kCommDestroy:
      communicators_.erase(key);
      return;
    case EventKind::kCollective:
    case EventKind::kP2P: {
      if (auto it = communicators_.find(key); it != communicators_.end()) it->second.fill(ev);
      return;
    }
    default:
      return;
  }
}

}  // namespace ingero::hal
