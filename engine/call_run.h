// A run of calls that tiered retention folded (store/tiers.h), read back whole: `calls`
// successful launches (kind kLaunch) of one op on one thread and stream, none nested in
// another call. Read back
// as calls, a run's calls are spread evenly from its first start to its last end, with its
// minimum first, its maximum last and the rest of its total in between, so counts, sums,
// extremes, rates and the gaps between runs are those of the calls it replaced.
//
// TraceSource::call_runs gives runs whole to the passes that only add calls up (op
// statistics, rules that count other kinds): a run costs them one step instead of one per
// call. call() gives the same calls as TraceSource::calls.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hal/event.h"

namespace ingero::engine {

// Where a run's calls lie, without what they are: enough to spread them (and for the step
// model, which keeps a run as one item).
struct RunShape {
  int64_t ts_ns = 0;     // start of the first call
  uint64_t span_ns = 0;  // to the end of the last call
  uint64_t calls = 1, sum_ns = 0, min_ns = 0, max_ns = 0;

  // Call k's duration (k < calls) and the idle time after it.
  uint64_t duration(uint64_t k) const;
  uint64_t gap(uint64_t k) const;
  // Start of the last call.
  int64_t last_start() const;
  // Whether every call of the run starts inside [from, to].
  bool inside(int64_t from, int64_t to) const { return ts_ns >= from && last_start() <= to; }
  // Every call's start and duration in order, without making events:
  // fn(uint64_t k, int64_t start, uint64_t duration).
  template <class Fn>
  void for_each_span(Fn&& fn) const {
    // duration(k) and gap(k) with their quotients taken once.
    uint64_t middle = calls > 2 ? calls - 2 : 1, gaps = calls > 1 ? calls - 1 : 1;
    uint64_t rest = calls > 2 ? sum_ns - min_ns - max_ns : 0;
    uint64_t idle = calls > 1 && span_ns > sum_ns ? span_ns - sum_ns : 0;
    uint64_t d = rest / middle, d_extra = rest % middle, g = idle / gaps, g_extra = idle % gaps;
    int64_t ts = ts_ns;
    for (uint64_t k = 0; k < calls; ++k) {
      uint64_t dur = calls == 1       ? sum_ns
                     : k == 0         ? min_ns
                     : k == calls - 1 ? max_ns
                                      : d + (k - 1 < d_extra ? 1 : 0);
      fn(k, ts, dur);
      ts += int64_t(dur + g + (k < g_extra ? 1 : 0));
    }
  }
};

struct CallRun : RunShape {
  uint32_t pid = 0, tid = 0;
  std::array<char, 16> comm{};
  uint64_t cgroup_id = 0;
  std::string_view vendor, api, op, library;  // storage that lives as long as the source
  hal::EventKind kind = hal::EventKind::kUnknown;
  std::optional<uint64_t> stream, device;
  uint64_t nested = 0;           // traced calls made inside the run's calls, in all
  uint64_t stack_id = 0;         // the first call's stack; the others share it
  std::optional<uint64_t> func;  // launches: the kernel's function, which every call shares

  // Call k, starting at `ts` (the previous call's start + its duration + its gap), as
  // TraceSource::calls gives it. Sets every field a call row would.
  void call(uint64_t k, int64_t ts, hal::Event& e) const;
  // Every call in order: fn(const hal::Event&).
  template <class Fn>
  void for_each_call(Fn&& fn) const {
    hal::Event e;
    for_each_span([&](uint64_t k, int64_t start, uint64_t) {
      call(k, start, e);
      fn(static_cast<const hal::Event&>(e));
    });
  }
};

}  // namespace ingero::engine
