// Why the kernel refused to load a BPF object, from what libbpf said while it loaded it: the
// program refused, and the verifier's last word on it. EACCES and EPERM come from the verifier
// and from a security policy as well as from missing privileges: "Permission denied" alone sent
// a root user on Linux 6.18.44 to look at privileges, where the verifier had said "combined
// stack size of 4 calls is 560. Too large".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ingero::hal {

struct LoadFailure {
  std::string program;  // the program libbpf said failed to load
  std::string reason;   // the verifier's last line about it; "" when it never ran
};

// The last program `libbpf_output` (libbpf's warnings while loading) says failed to load, with
// its verifier log's last line that is not a statistic; nullopt when it names none.
std::optional<LoadFailure> load_failure_of(std::string_view libbpf_output);

// Whether effective capabilities `cap_eff` (/proc/self/status CapEff) allow loading tracing
// programs: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (kernels before 5.8).
bool can_load_tracing(uint64_t cap_eff);

// This process's effective capabilities; nullopt when /proc/self/status cannot be read.
std::optional<uint64_t> effective_caps();

}  // namespace ingero::hal
