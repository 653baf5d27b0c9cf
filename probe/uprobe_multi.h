// A uprobe_multi link (Linux 6.6+) made with the raw bpf(BPF_LINK_CREATE) syscall: Debian
// 12's libbpf 1.1 predates bpf_program__attach_uprobe_multi. One link attaches a program to
// many offsets of one file, for every process (pid 0 in the attribute: no filter).
//
// The program must have been loaded with expected attach type kBpfTraceUprobeMulti
// (bpf_program__set_expected_attach_type before load); a kernel without uprobe_multi
// refuses that load, which is how callers detect it and fall back to perf-event uprobes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hal/result.h"

namespace ingero::hal {

inline constexpr int kBpfTraceUprobeMulti = 48;    // BPF_TRACE_UPROBE_MULTI, stable since 6.6
inline constexpr int kBpfTraceUprobeSession = 57;  // BPF_TRACE_UPROBE_SESSION, since 6.12

enum class UprobeMode {
  kEntry,    // runs at function entry
  kReturn,   // runs at function return
  kSession,  // one program at entry and, unless the entry run returned non-zero, at return
};

// Returns the link fd (the caller closes it to detach). cookies may be empty. A kSession link
// needs a program loaded with expected attach type kBpfTraceUprobeSession. `pid` > 0: only
// that process's calls run the program.
Result<int> link_uprobe_multi(int prog_fd, const std::string& path,
                              std::span<const uint64_t> offsets, std::span<const uint64_t> cookies,
                              UprobeMode mode, uint32_t pid = 0);

}  // namespace ingero::hal
