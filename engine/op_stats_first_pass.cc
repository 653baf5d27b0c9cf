#include "engine/op_stats_first_pass.h"

#include "hal/memory.h"

namespace ingero::engine::op_stats_detail {

template <class T>
void ChunkList<T>::grow() {
  constexpr size_t kFirst = 1024, kMaxBytes = size_t(8) << 20;
  size_t n = chunks_.empty() ? kFirst : std::min(chunks_.back().second * 2, kMaxBytes / sizeof(T));
  size_t bytes = n * sizeof(T);
  // Chunks of 2 MiB and more are faulted in a huge page at a time.
  void* p = bytes >= (size_t(2) << 20) ? hal::alloc_huge_pages(bytes) : std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  chunks_.push_back({static_cast<T*>(p), n});
  last_ = 0;
}

template <class T>
void ChunkList<T>::clear() {
  for (auto& c : chunks_) std::free(c.first);
  chunks_.clear();
  last_ = 0;
  size_ = 0;
}

template class ChunkList<uint16_t>;
template class ChunkList<uint32_t>;
template class ChunkList<TailCatch::Kept>;

void HeldDurations::drop() {
  ok_ = false;
  std::vector<Group>().swap(groups_);
  std::vector<std::pair<size_t, uint64_t>>().swap(wide_);
}

void TailCatch::keep(const hal::Event& e, size_t a) {
  if (!ok_) return;
  if (calls_.size() >= max_) {
    ok_ = false;
    calls_.clear();
    more_ = {};
    return;
  }
  TailCall c = tail_call_of(e, a);
  Kept k{c.ts, c.stack, uint32_t(c.dur), c.group, c.tid, 0};
  if (c.dur > UINT32_MAX || c.off_cpu || c.preempts || c.peer_pid) {
    More m{c.dur, c.off_cpu, c.peer_pid, c.preempts, 0};
    if (m.peer_pid) {
      auto [it, fresh] =
          name_index_.try_emplace(std::string(e.peer_comm_view()), uint32_t(names_.size()));
      if (fresh) names_.push_back(it->first);
      m.peer_comm = it->second;
    }
    more_.push_back(m);
    k.more = uint32_t(more_.size());
  }
  calls_.push_back(k);
}

}  // namespace ingero::engine::op_stats_detail
