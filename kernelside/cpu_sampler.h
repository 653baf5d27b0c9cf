// On-CPU sampling of GPU processes: a CPU-clock perf event per online CPU at `hz`, each running
// the session's ingero_cpu_sample program (bpf/stacks.bpf.c), which keeps only samples of
// processes that made traced GPU calls and the processes they forked. At 49 Hz a thread busy
// on a CPU is sampled ~49 times a second with its native and Python stack: enough to say where
// a host gap went ("12.9 ms of each step in SlowDS.__getitem__") at well under 1% CPU.
#pragma once

#include <vector>

#include "probe/bpf_session.h"

namespace ingero::kernelside {

class CpuSampler {
 public:
  // The session must have loaded the sampling program (BpfConfig::cpu_samples).
  explicit CpuSampler(hal::BpfSession& session) : session_(session) {}
  ~CpuSampler();
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;
  // Opens and attaches one event per online CPU. A CPU the kernel refuses is an Error naming
  // it (nothing stays attached).
  Status start(int hz);

 private:
  hal::BpfSession& session_;
  // Each link owns its event's file (libbpf closes it at the detach): nothing else closes it.
  std::vector<hal::Link> links_;
};

}  // namespace ingero::kernelside
