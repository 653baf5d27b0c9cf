#include "hal/clock.h"

#include <time.h>

#include <cstdlib>

namespace ingero::hal {
namespace {

int64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

int64_t wall_now_ns() {
  // Test-only: INGERO_TEST_CLOCK_SKEW_NS skews this host's wall clock (tests/fleet).
  static const int64_t skew =
      getenv("INGERO_TEST_CLOCK_SKEW_NS") ? atoll(getenv("INGERO_TEST_CLOCK_SKEW_NS")) : 0;
  return clock_ns(CLOCK_REALTIME) + skew;
}

int64_t mono_now_ns() { return clock_ns(CLOCK_MONOTONIC); }

int64_t mono_to_wall_offset_ns() {
  int64_t best = 0, best_gap = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    int64_t m0 = mono_now_ns(), w = wall_now_ns(), m1 = mono_now_ns();
    if (m1 - m0 < best_gap) {
      best_gap = m1 - m0;
      best = w - (m0 + (m1 - m0) / 2);
    }
  }
  return best;
}

}  // namespace ingero::hal
