// The errors ingero makes of failed BPF calls, and libbpf's messages. Why the kernel refused to
// load a BPF object comes from what libbpf said while it loaded it: the program refused, and
// the verifier's last word on it. EACCES and EPERM come from the verifier and from a security
// policy as well as from missing privileges: "Permission denied" alone sent a root user on Linux
// 6.18.44 to look at privileges, where the verifier had said "combined stack size of 4 calls is
// 560. Too large".
#pragma once

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hal/result.h"

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

// A process's effective capabilities from its status file (`status`, /proc/self/status by
// default); nullopt when it cannot be read or holds no CapEff line.
std::optional<uint64_t> effective_caps(const std::string& status = "/proc/self/status");

// Whether `uid_map` (/proc/self/uid_map by default) is a user namespace's other than the
// host's: there root's capabilities hold only inside it, and the kernel loads no tracing
// program for them (a rootless container, `unshare -U -r`).
bool in_user_namespace(const std::string& uid_map = "/proc/self/uid_map");

// Whether this process holds what loading tracing programs takes (can_load_tracing), in the
// host's user namespace: where it does, a refused load is the kernel's verdict (its verifier, a
// security policy), not privileges'.
bool may_load_bpf();

// libbpf's print callback (libbpf_set_print): silent but with INGERO_LIBBPF_DEBUG, and its
// warnings kept while a LoadWarnings of this thread lives.
int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args);

// Keeps libbpf's warnings on this thread from its construction to its destruction (a failed
// program's verifier log, which can run to megabytes, by its head and tail).
class LoadWarnings {
 public:
  LoadWarnings();
  ~LoadWarnings();
  LoadWarnings(const LoadWarnings&) = delete;
  LoadWarnings& operator=(const LoadWarnings&) = delete;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string* outer_;  // a capture this one is nested in
};

// `what` failed with errno `err` (either sign); with the privileges hint for EPERM and EACCES.
Error bpf_error(const std::string& what, int err);

// A load that failed with `err`, with what the kernel refused and why from libbpf's warnings
// `warnings`. The privileges hint only where they are missing: as root, EACCES is the
// verifier's and EPERM a security policy's.
Error load_error(int err, const std::string& warnings);

}  // namespace ingero::hal
