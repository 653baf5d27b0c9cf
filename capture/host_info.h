// Facts about the machine the tracer runs on, for session records and `check`.
#pragma once

#include <cstdint>
#include <string>

#include "hal/clock.h"

namespace ingero::capture {

struct HostInfo {
  std::string hostname, kernel, os_release, cpu_model;
  int cpu_cores = 0;
  int64_t mem_total_mib = 0;
};

HostInfo read_host_info();
// The clocks (hal/clock.h), where the tracer's code has always called them.
using hal::mono_now_ns;
using hal::mono_to_wall_offset_ns;
using hal::TraceClock;
using hal::wall_now_ns;
std::string read_small_file(const std::string& path);  // "" if unreadable; trailing \n cut
// Effective capabilities of this process (bit per CAP_*).
uint64_t effective_caps();

}  // namespace ingero::capture
