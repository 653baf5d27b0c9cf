// Internals of the step timeline (part 2 of the step model) shared by its three files:
// steps_timeline.cc (the sweep: host categories, GPU idle, host gaps), steps_gap_attribution.cc
// (what a gap's thread did) and steps_preemption.cc (the CPU lost by the threads feeding the GPU).
#pragma once

#include <map>
#include <vector>

#include "engine/steps_internal.h"

namespace ingero::engine::steps_detail {

class Attributor {
 public:
  Attributor(uint32_t pid, const HostContext& host,
             const std::map<uint32_t, std::vector<CpuSample>>& samples)
      : host_(host), samples_(samples) {
    if (auto it = host.offcpu.find(pid); it != host.offcpu.end())
      for (const auto& iv : it->second) by_tid_[iv.tid].push_back(&iv);
    if (auto it = host.block_by_pid.find(pid); it != host.block_by_pid.end()) blocks_ = &it->second;
  }

  // `tally`: null for warm-up gaps, which the summary leaves out.
  void attribute(HostGap& g, Tallies* tally);

 private:
  const HostContext& host_;
  const std::map<uint32_t, std::vector<CpuSample>>& samples_;
  std::map<uint32_t, std::vector<const OffCpuInterval*>> by_tid_;
  const std::vector<BlockRequest>* blocks_ = nullptr;
};

// Who took the CPU of the threads that feed the GPU in steady steps, and which call each
// preemption delayed.
void count_preemptors(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                      StepSeries& s, Tallies& tally);

}  // namespace ingero::engine::steps_detail
