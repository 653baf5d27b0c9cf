// Attaches the host-context programs of the session's BPF object (bpf/host.bpf.c): scheduler,
// process lifecycle, memory, block I/O, TCP, OOM. Each tracepoint is reported on its own, so
// `check` can list what this kernel refuses; `trace` stops at the first refusal.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "probe/bpf_session.h"

namespace ingero::kernelside {

class HostPrograms {
 public:
  // The host-context programs must have been loaded (BpfConfig::host_context).
  explicit HostPrograms(hal::BpfSession& session) : session_(session) {}
  // Attaches every program; one (tracepoint, status) per program.
  std::vector<std::pair<std::string, Status>> attach();
  size_t attached() const { return links_.size(); }

 private:
  hal::BpfSession& session_;
  std::vector<hal::Link> links_;
};

}  // namespace ingero::kernelside
