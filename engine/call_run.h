// A run of calls that tiered retention folded (store/tiers.h), read back whole: `calls`
// successful launches (kind kLaunch) of one op on one thread and stream, none nested in
// another call. Read back
// as calls, a run's calls are spread evenly from its first start to its last end: its timed
// calls first (their minimum first, their maximum last, the rest of their total in between),
// then those seen at entry only, at their op's mean and marked untimed; so counts, sums,
// extremes, rates and the gaps between runs are those of the calls it replaced.
//
// TraceSource::call_runs gives runs whole to the passes that only add calls up (op
// statistics, rules that count other kinds): a run costs them one step instead of one per
// call. call() gives the same calls as TraceSource::calls.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "hal/event.h"

namespace ingero::engine {

// Where a run's calls lie, without what they are: enough to spread them (and for the step
// model, which keeps a run as one item). No call starts after the run's last end: where the
// estimates of calls seen at entry only make the calls longer than the span (their op's mean,
// which one slow timed call lifts), the last ones start at its end.
struct RunShape {
  int64_t ts_ns = 0;                                       // start of the first call
  uint64_t span_ns = 0;                                    // to the end of the last call
  uint64_t calls = 1, sum_ns = 0, min_ns = 0, max_ns = 0;  // of every call, estimates included
  // Calls seen at entry only (store/untimed_durations.h): the last `untimed` calls, each
  // `untimed_ns` long (their op's mean), count in the total and extremes above but are no
  // latency. The timed calls come first, spread by their own extremes.
  uint64_t untimed = 0, untimed_ns = 0, timed_min_ns = 0, timed_max_ns = 0;

  uint64_t timed() const { return calls - untimed; }
  // The slowest timed call (0 when none was timed).
  uint64_t timed_max() const { return untimed == 0 ? max_ns : timed() ? timed_max_ns : 0; }

  // Call k's duration (k < calls) and the idle time after it.
  uint64_t duration(uint64_t k) const;
  uint64_t gap(uint64_t k) const;
  // Start of the last call.
  int64_t last_start() const;
  // Start of call k (k < calls), as for_each_span gives it, without walking the calls before.
  int64_t start(uint64_t k) const;
  // The first call starting at or after t (calls where none): a binary search over start().
  uint64_t first_from(int64_t t) const;
  // Whether every call of the run starts inside [from, to].
  bool inside(int64_t from, int64_t to) const { return ts_ns >= from && last_start() <= to; }
  // Every call's start and duration in order (the first `first` calls only, where fewer),
  // without making events: fn(uint64_t k, int64_t start, uint64_t duration).
  template <class Fn>
  void for_each_span(Fn&& fn, uint64_t first = UINT64_MAX) const {
    // duration(k) and gap(k) with their quotients taken once.
    const Timed t = timed_shape();
    uint64_t middle = t.calls > 2 ? t.calls - 2 : 1, gaps = calls > 1 ? calls - 1 : 1;
    uint64_t rest = t.calls > 2 ? t.sum - t.min - t.max : 0;
    uint64_t idle = calls > 1 && span_ns > sum_ns ? span_ns - sum_ns : 0;
    uint64_t d = rest / middle, d_extra = rest % middle, g = idle / gaps, g_extra = idle % gaps;
    int64_t ts = ts_ns, last_end = ts_ns + int64_t(span_ns);
    for (uint64_t k = 0, n = std::min(calls, first); k < n; ++k) {
      uint64_t dur = k >= t.calls       ? untimed_ns
                     : t.calls == 1     ? t.sum
                     : k == 0           ? t.min
                     : k == t.calls - 1 ? t.max
                                        : d + (k - 1 < d_extra ? 1 : 0);
      fn(k, std::min(ts, last_end), dur);
      ts += int64_t(dur + g + (k < g_extra ? 1 : 0));
    }
  }

 private:
  // The timed calls' count, total and extremes.
  struct Timed {
    uint64_t calls, sum, min, max;
  };
  // The calls before call k (k <= calls): their durations, and the gaps after them.
  uint64_t durations_before(uint64_t k) const;
  uint64_t gaps_before(uint64_t k) const;
  Timed timed_shape() const {
    if (untimed == 0) return {calls, sum_ns, min_ns, max_ns};
    return {timed(), sum_ns - untimed * untimed_ns, timed_min_ns, timed_max_ns};
  }
};

struct CallRun : RunShape {
  uint32_t pid = 0, tid = 0;
  std::array<char, 16> comm{};
  // The comm as text: up to its first NUL (a 15-character comm fills the array but one).
  std::string_view comm_view() const { return {comm.data(), strnlen(comm.data(), comm.size())}; }
  uint64_t cgroup_id = 0;
  std::string_view vendor, api, op, library;  // storage that lives as long as the source
  hal::EventKind kind = hal::EventKind::kUnknown;
  std::optional<uint64_t> stream, device;
  uint64_t nested = 0;           // traced calls made inside the run's calls, in all
  uint64_t stack_id = 0;         // the first call's stack; the others share it
  std::optional<uint64_t> func;  // launches: the kernel's function, which every call shares
  // Launches of several kernels: how many of its calls launched each function, as the store
  // keeps it: "func:count,+delta:count,..." in decimal, by function, each function after the
  // first as its distance from the one before ("4096:372,+320:372" is 4096 and 4416); the
  // counts add up to `calls`; which call launched which is not kept. "" where every call
  // launched `func`, or where the run kept no kernel (files before it, a run of more kernels
  // than the store keeps). Storage that lives as long as the source.
  std::string_view funcs;

  // Each kernel of the run and its launches, fn(uint64_t func, uint64_t launches): `func`'s
  // for all its calls, or those of `funcs`. False, with nothing given, where the run knows no
  // kernel or `funcs` is not whole or does not add up to its calls (damage).
  template <class Fn>
  bool for_each_kernel(Fn&& fn) const {
    if (func) {
      fn(*func, calls);
      return true;
    }
    if (funcs.empty() || !kernel_counts_fit()) return false;
    parse_funcs([&](uint64_t f, uint64_t n) { fn(f, n); });
    return true;
  }

  // Call k, starting at `ts` (the previous call's start + its duration + its gap), as
  // TraceSource::calls gives it. Sets every field a call row would; calls from timed() on are
  // marked untimed.
  void call(uint64_t k, int64_t ts, hal::Event& e) const;
  // Every call in order: fn(const hal::Event&).
  template <class Fn>
  void for_each_call(Fn&& fn) const {
    first_calls(fn, calls);
  }
  // Its timed calls only (they come first): fn(const hal::Event&).
  template <class Fn>
  void for_each_timed_call(Fn&& fn) const {
    first_calls(fn, timed());
  }

 private:
  // Whether `funcs` parses whole and its counts add up to `calls`.
  bool kernel_counts_fit() const;
  // fn(func, count) for each entry of `funcs`, in order; false where the text is not whole
  // (what came before was given).
  template <class Fn>
  bool parse_funcs(Fn&& fn) const {
    size_t i = 0;
    auto number = [&](uint64_t& v) {
      size_t start = i;
      v = 0;
      while (i < funcs.size() && funcs[i] >= '0' && funcs[i] <= '9') {
        uint64_t d = uint64_t(funcs[i++] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
      }
      return i > start;
    };
    uint64_t f = 0;
    for (bool first = true; i < funcs.size(); first = false) {
      if (!first && funcs[i++] != '+') return false;
      uint64_t d = 0, n = 0;
      if (!number(d) || i >= funcs.size() || funcs[i++] != ':' || !number(n)) return false;
      if (!first && (d == 0 || d > UINT64_MAX - f)) return false;
      f = first ? d : f + d;
      fn(f, n);
      if (i < funcs.size() && (funcs[i++] != ',' || i == funcs.size())) return false;
    }
    return true;
  }
  template <class Fn>
  void first_calls(Fn& fn, uint64_t n) const {
    hal::Event e;
    for_each_span(
        [&](uint64_t k, int64_t start, uint64_t) {
          call(k, start, e);
          fn(static_cast<const hal::Event&>(e));
        },
        n);
  }
};

}  // namespace ingero::engine
