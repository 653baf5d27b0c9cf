// Internals of the step timeline (part 2 of the step model) shared by its three files:
// steps_timeline.cc (the sweep: host categories, GPU idle, host gaps), steps_gap_attribution.cc
// (what a gap's thread did) and steps_preemption.cc (the CPU lost by the threads feeding the GPU).
#pragma once

#include <functional>
#include <map>
#include <queue>
#include <utility>
#include <vector>

#include "engine/steps_internal.h"

namespace ingero::engine::steps_detail {

class Attributor {
 public:
  Attributor(const Proc& p, const HostContext& host,
             const std::map<uint32_t, std::vector<CpuSample>>& samples);

  // `tally`: null for warm-up gaps, which the summary leaves out.
  void attribute(HostGap& g, Tallies* tally);

  // How the process's host spent [a, b), the time between GPU calls that is not a gap: on CPU
  // where any thread making GPU calls ran (between its first call and its last one), else
  // preempted where any of them was runnable, blocked on I/O where any was in uninterruptible
  // sleep, else asleep; all of it unknown in a trace without scheduler events. No preemptors,
  // block requests or samples. Spans must come in time order: a cursor per thread moves
  // forward only, so a sweep over every call is one pass over the intervals.
  GapTime host_spent(int64_t a, int64_t b);

 private:
  void place_intervals(const PodVector<OffCpuInterval>& v);  // offcpu_, order_, by_tid_

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
  // host_spent(): the threads making GPU calls, each with the span of its calls and its first
  // interval that may still overlap the next span asked for (a position in order_, and the end
  // of its stretch); and the edges of one span's off-CPU parts, reused.
  struct Feeder {
    int64_t from = 0, to = 0;
    uint32_t next = 0, last = 0;
  };
  std::vector<Feeder> feeders_;   // by the start of their spans
  size_t started_ = 0;            // feeders_[started_:] start after the spans asked so far
  std::vector<uint32_t> active_;  // those whose span may meet the next one asked
  std::vector<uint32_t> place_;   // each feeder's position in active_, while it is there
  // The ends of active_'s spans, the soonest first: (to, feeder).
  std::priority_queue<std::pair<int64_t, uint32_t>, std::vector<std::pair<int64_t, uint32_t>>,
                      std::greater<>>
      ends_;
  struct Edge {
    int64_t t;
    int8_t step;   // +1: a thread leaves the CPU, -1: it comes back
    uint8_t what;  // 0 asleep, 1 I/O, 2 preempted
  };
  std::vector<Edge> edges_;
};

// Who took the CPU of the threads that feed the GPU in steady steps, and which call each
// preemption delayed.
void count_preemptors(const Proc& p, const HostContext& host, const FeedingThreads& feeding,
                      StepSeries& s, Tallies& tally);

}  // namespace ingero::engine::steps_detail
