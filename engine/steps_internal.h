// Internals of the step model shared by steps.cc (calls, cadence), steps_timeline.cc (the
// sweep, gaps, attribution) and steps_summary.cc (sites, locations, the summary).
#pragma once

#include <cstdint>
#include <map>
#include <queue>
#include <string>
#include <tuple>
#include <vector>

#include "engine/call_run.h"
#include "engine/steps.h"

namespace ingero::engine::steps_detail {

// What the host is doing inside a top-level call.
enum Cat : uint8_t { kWait = 0, kEnqueue = 1, kApi = 2 };
inline constexpr uint64_t kNoStream = UINT64_MAX;

inline constexpr uint32_t kNoRun = UINT32_MAX;

struct Call {
  int64_t start = 0, end = 0;
  uint64_t stream = kNoStream;
  uint64_t stack = 0;
  uint64_t bytes = 0;
  uint32_t tid = 0;
  uint32_t op = 0;  // index into Proc::ops
  // A folded run of launches (engine/call_run.h) kept as one item: its index in Proc::runs.
  // Its calls lie from `start` to `end` on this thread and stream, none nested, spread as the
  // run reads back. Else kNoRun: one call.
  uint32_t run = kNoRun;
  hal::EventKind kind = hal::EventKind::kUnknown;
  Cat cat = kApi;
  bool work : 1 = false;  // queues device work on `stream`
  bool d2h : 1 = false;
  bool h2d : 1 = false;
};

struct Proc {
  uint32_t pid = 0;
  std::vector<Call> calls;  // top-level, start order
  std::vector<RunShape> runs;
  std::vector<TopLevelOp> ops;
  std::map<std::pair<const char*, const char*>, uint32_t> op_index;  // (op, api) storage
  std::map<uint32_t, size_t> open;                                   // tid -> its last call
  uint64_t dropped = 0;

  uint64_t calls_in(const Call& c) const { return c.run == kNoRun ? 1 : runs[c.run].calls; }
  int64_t last_start(const Call& c) const {
    return c.run == kNoRun ? c.start : runs[c.run].last_start();
  }
  // Each call of item c: fn(uint64_t k, int64_t start, uint64_t duration).
  template <class Fn>
  void for_each_span(const Call& c, Fn&& fn) const {
    if (c.run == kNoRun)
      fn(uint64_t(0), c.start, uint64_t(c.end - c.start));
    else
      runs[c.run].for_each_span(fn);
  }
};

// Every call of p.calls in start order, each run's calls one by one (a run's calls interleave
// with those of other threads): fn(int64_t start, int64_t end, size_t item). Ties: the item
// listed first, then a run's earlier call.
template <class Fn>
void each_call(const Proc& p, Fn&& fn) {
  struct Next {
    int64_t start;
    uint64_t k;
    size_t item;
    bool operator>(const Next& o) const {
      return std::tie(start, item, k) > std::tie(o.start, o.item, o.k);
    }
  };
  std::priority_queue<Next, std::vector<Next>, std::greater<Next>> runs;
  size_t i = 0;
  while (i < p.calls.size() || !runs.empty()) {
    if (runs.empty() || (i < p.calls.size() && p.calls[i].start <= runs.top().start)) {
      const Call& c = p.calls[i];
      if (c.run == kNoRun)
        fn(c.start, c.end, i);
      else
        runs.push({c.start, 0, i});
      ++i;
      continue;
    }
    Next n = runs.top();
    runs.pop();
    const RunShape& r = p.runs[p.calls[n.item].run];
    int64_t end = n.start + int64_t(r.duration(n.k));
    fn(n.start, end, n.item);
    if (n.k + 1 < r.calls) runs.push({end + int64_t(r.gap(n.k)), n.k + 1, n.item});
  }
}

// A blocking round trip: consecutive waits of one thread from one site.
struct RoundTrip {
  int64_t start = 0, end = 0;
  uint32_t tid = 0;
  uint32_t site = 0;  // index into Sites
  uint64_t stack = 0;
  bool d2h = false;
  uint64_t wait_ns = 0;
};

// Call sites: a stack's user frames, interned. The stack ids of one site differ where native
// unwinding differs (an unresolved frame); its Python lines do not.
class Sites {
 public:
  explicit Sites(TraceSource& source) : source_(source) {}
  uint32_t of(uint64_t stack, std::string_view op);
  const std::string& key(uint32_t site) const { return keys_[site]; }
  uint64_t stack(uint32_t site) const { return stacks_[site]; }
  // "function (file:line)" of the innermost user frame of a stack ("" without frames).
  std::string where(uint64_t stack);

 private:
  TraceSource& source_;
  std::map<uint64_t, uint32_t> by_stack_;
  std::map<std::string, uint32_t> by_key_;
  std::vector<std::string> keys_;
  std::vector<uint64_t> stacks_;
  std::map<uint64_t, std::string> where_;
};

Cat category(const hal::Event& e);
// A file of an installed package (site-packages, dist-packages, the standard library).
bool library_file(const std::string& f);
// A native module of the system or a vendor runtime (libc, the vDSO, libcuda, site-packages).
bool library_module(const std::string& m);
std::string basename(const std::string& f);
bool puts_work(hal::EventKind k);

// Where the steady steps' host gaps went, for the summary.
struct Tallies {
  std::map<uint64_t, uint64_t> samples;       // on-CPU sample stack -> samples
  std::map<uint64_t, uint64_t> after_ns;      // stack of the call ending a gap -> gap ns
  std::map<uint64_t, uint64_t> before_io_ns;  // stack of the call before an I/O gap -> io ns
  std::map<std::pair<uint32_t, std::string>, uint64_t> preemptor_ns;  // (pid, comm) -> ns
  // Who preempted GPU-feeding threads anywhere in steady steps: (pid, comm) -> ns.
  std::map<std::pair<uint32_t, std::string>, uint64_t> step_preemptor_ns;
  // Steady preempted time by the stack of the GPU call the thread made next: the code it was
  // running toward when it lost the CPU. (stack, op) -> ns, and the thread of the longest.
  std::map<std::pair<uint64_t, std::string>, uint64_t> preempted_before_ns;
  std::map<std::pair<uint64_t, std::string>, uint32_t> preempted_before_tid;
};

// steps_timeline.cc: fills the breakdown, counts and gaps of every step in `s`, from the calls
// and the step boundaries already in `s.steps`.
void build_timeline(const Proc& p, const HostContext& host,
                    const std::map<uint32_t, std::vector<CpuSample>>& samples, StepSeries& s,
                    Tallies& tally);

// steps_summary.cc
void count_sites(const Proc& p, Sites& sites, const std::vector<RoundTrip>& trips, StepSeries& s);
void summarize(StepSeries& s, Sites& sites, const Tallies& tally);
// Nearest-rank quantile of an unsorted vector (copied).
uint64_t quantile(std::vector<uint64_t> v, double q);

}  // namespace ingero::engine::steps_detail
