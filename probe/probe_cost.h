// What a uprobe costs on this kernel, measured on a function no other process can reach
// (`ingero check --bench`). Uprobe cost varies ten-fold between kernels, CPUs and VMs (the
// breakpoint trap, single-stepping or emulating the first instruction, the return
// trampoline), so predicting ingero's overhead for a workload needs a measurement here.
//
// PrivateFunction is a few bytes of machine code in an anonymous memory file (memfd) that
// only this process maps: uprobes attach per file, so probing it touches no other process,
// unlike a probe on a shared library. Its first instruction is `push %rbp` (x86-64) or
// `stp x29, x30` (arm64), as the entry points of libcudart, libamdhip64 and libibverbs
// begin, so the kernel handles the breakpoint the way it does on the real libraries.
//
// MinimalProbePair is the cheapest useful uprobe pair (bpf/probe_cost.bpf.c: count entries
// and returns), the floor any tracer pays. Both are RAII: destruction detaches and unmaps.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hal/result.h"
#include "probe/bpf_session.h"  // Link

struct probe_cost_bpf;

namespace ingero::hal {

class PrivateFunction {
 public:
  using Fn = uint64_t (*)(uint64_t);
  // Errors name the step (memfd_create, write, mmap PROT_EXEC: a noexec policy) and errno.
  // Checks that the code runs (f(41) == 42) before returning.
  static Result<std::unique_ptr<PrivateFunction>> create();
  ~PrivateFunction();
  PrivateFunction(const PrivateFunction&) = delete;
  PrivateFunction& operator=(const PrivateFunction&) = delete;

  // A path the kernel resolves to the file, valid in this process only: /proc/self/fd/N.
  const std::string& path() const { return path_; }
  uint64_t file_offset() const { return 0; }
  // Returns x + 1.
  uint64_t call(uint64_t x) const { return fn_(x); }

 private:
  PrivateFunction() = default;
  int fd_ = -1;
  void* map_ = nullptr;
  Fn fn_ = nullptr;
  std::string path_;
};

class MinimalProbePair {
 public:
  // Loads bpf/probe_cost.bpf.c and attaches its entry and return programs at
  // path:file_offset, for every process (pid -1; the file decides who is probed). Attaches
  // the way BpfSession does on this kernel: one uprobe_multi link per direction (Linux
  // 6.6+), else perf-event uprobes, so the two are compared on the same kernel path.
  // prefer_multi = false forces perf-event uprobes.
  static Result<std::unique_ptr<MinimalProbePair>> attach(const std::string& path,
                                                          uint64_t file_offset,
                                                          bool prefer_multi = true);
  ~MinimalProbePair();
  MinimalProbePair(const MinimalProbePair&) = delete;
  MinimalProbePair& operator=(const MinimalProbePair&) = delete;

  bool uses_uprobe_multi() const { return multi_; }
  // Hits so far, summed over CPUs.
  uint64_t entries() const;
  uint64_t returns() const;

 private:
  MinimalProbePair() = default;
  Status load_and_attach(const std::string& path, uint64_t file_offset);
  uint64_t count(uint32_t key) const;
  probe_cost_bpf* skel_ = nullptr;
  bool multi_ = false;
  std::vector<Link> links_;
};

}  // namespace ingero::hal
