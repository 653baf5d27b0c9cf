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
std::string read_small_file(const std::string& path);  // "" if unreadable; trailing \n cut
// Effective capabilities of this process (bit per CAP_*).
uint64_t effective_caps();

}  // namespace ingero::capture
