#include "capture/lookup_rest.h"

#include <algorithm>

namespace ingero::capture {

std::vector<uint32_t> LookupRest::to_rest(const std::vector<Seen>& seen) {
  std::vector<uint32_t> out;
  for (const Seen& s : seen) {
    Probe& p = probes_[s.probe];
    if (p.resting) continue;
    if (p.rebase || s.news != p.news) {  // back from rest, or it named something
      p.rebase = false;
      p.news = s.news;
      p.base = s.held_back;
      continue;
    }
    if (s.held_back - p.base >= p.proof) out.push_back(s.probe);
  }
  return out;
}

bool LookupRest::to_wake(uint64_t unnamed) { return resting_ > 0 && unnamed > unnamed_at_rest_; }

void LookupRest::rested(const std::vector<uint32_t>& probes, uint64_t unnamed) {
  for (uint32_t id : probes) {
    Probe& p = probes_[id];
    if (p.resting) continue;
    p.resting = true;
    ++resting_;
    ++rests_;
  }
  unnamed_at_rest_ = unnamed;
}

void LookupRest::woke(bool doubling) {
  if (!resting_) return;
  for (auto& [id, p] : probes_) {
    if (!p.resting) continue;
    p.resting = false;
    p.rebase = true;
    if (doubling) p.proof = std::min(p.proof * 2, kMaxProof);
  }
  resting_ = 0;
  ++wakes_;
}

uint64_t LookupRest::proof(uint32_t probe) const {
  auto it = probes_.find(probe);
  return it == probes_.end() ? kFirstProof : it->second.proof;
}

}  // namespace ingero::capture
