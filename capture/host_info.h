// Facts about the machine the tracer runs on, for session records and `check`.
#pragma once

#include <cstdint>
#include <string>

namespace ingero::capture {

struct HostInfo {
  std::string hostname, kernel, os_release, cpu_model;
  int cpu_cores = 0;
  int64_t mem_total_mib = 0;
};

HostInfo read_host_info();
int64_t wall_now_ns();
int64_t mono_now_ns();
// CLOCK_REALTIME - CLOCK_MONOTONIC, sampled tightly.
int64_t mono_to_wall_offset_ns();

// A session's clock: CLOCK_MONOTONIC shifted to Unix time once, when the session starts. Its
// events are stamped so (the probes read the monotonic clock); every other time the session
// stores or compares with them (its end, the analysis window, retention's cut, host and device
// samples) is read from here, so that a step of the wall clock while tracing (NTP correcting a
// drifted host, a VM resumed from a snapshot) cannot split them.
struct TraceClock {
  int64_t mono_to_wall_ns = 0;
  int64_t now() const { return mono_now_ns() + mono_to_wall_ns; }
  int64_t wall(int64_t mono_ns) const { return mono_ns + mono_to_wall_ns; }
};
std::string read_small_file(const std::string& path);  // "" if unreadable; trailing \n cut
// Effective capabilities of this process (bit per CAP_*).
uint64_t effective_caps();

}  // namespace ingero::capture
