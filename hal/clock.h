// The clocks a trace is stamped with, for every layer that stamps or compares with it: the
// tracer, the store's readers of a live trace, the exporters.
#pragma once

#include <cstdint>

namespace ingero::hal {

int64_t wall_now_ns();  // CLOCK_REALTIME
int64_t mono_now_ns();  // CLOCK_MONOTONIC
// CLOCK_REALTIME - CLOCK_MONOTONIC, sampled tightly.
int64_t mono_to_wall_offset_ns();

// A session's clock: CLOCK_MONOTONIC shifted to Unix time once, when the session starts. Its
// events are stamped so (the probes read the monotonic clock); every other time the session
// stores or compares with them (its end, the analysis window, retention's cut, host and device
// samples, what OTLP sends) is read from here, so that a step of the wall clock while tracing
// (NTP correcting a drifted host, a VM resumed from a snapshot) cannot split them.
struct TraceClock {
  int64_t mono_to_wall_ns = 0;
  int64_t now() const { return mono_now_ns() + mono_to_wall_ns; }
  int64_t wall(int64_t mono_ns) const { return mono_ns + mono_to_wall_ns; }
};

}  // namespace ingero::hal
