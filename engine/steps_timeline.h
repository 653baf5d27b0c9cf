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
             const std::map<uint32_t, std::vector<CpuSample>>& samples);

  // `tally`: null for warm-up gaps, which the summary leaves out.
  void attribute(HostGap& g, Tallies* tally);

 private:
  const HostContext& host_;
  const std::map<uint32_t, std::vector<CpuSample>>& samples_;
  // The process's off-CPU intervals, and each thread's of them as a stretch of `order_`:
  // indexes into `offcpu_`, a thread's in start order. 4 bytes an interval, allocated once at
  // its size (a vector of pointers a thread, grown by doubling, was 8 bytes an interval and
  // its copies: a tenth of the tracer's page faults at the session's end).
  const PodVector<OffCpuInterval>* offcpu_ = nullptr;
  std::vector<uint32_t> order_;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> by_tid_;  // tid -> [begin, end) of order_
  const std::vector<BlockRequest>* blocks_ = nullptr;
};

// Who took the CPU of the threads that feed the GPU in steady steps, and which call each
// preemption delayed.
void count_preemptors(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                      StepSeries& s, Tallies& tally);

}  // namespace ingero::engine::steps_detail
