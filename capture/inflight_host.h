// The in-flight monitor's reads on a live host: the frames and the scheduler's data from the BPF
// session, thread states, stack pointers and names from /proc.
#pragma once

#include <string>

#include "capture/inflight_monitor.h"
#include "probe/bpf_session.h"

namespace ingero::capture {

class ProcInflightHost final : public InflightMonitor::Host {
 public:
  explicit ProcInflightHost(hal::BpfSession& session, std::string proc_root = "/proc")
      : session_(session), proc_root_(std::move(proc_root)) {}
  Status frames(std::vector<ingero_inflight_rec>& out) override;
  std::optional<hal::ThreadSched> sched(uint32_t tid) override;
  char proc_state(uint32_t pid, uint32_t tid) override;
  std::vector<uint32_t> threads(uint32_t pid) override;
  uint64_t blocked_sp(uint32_t pid, uint32_t tid) override;
  std::string comm(uint32_t pid, uint32_t tid) override;
  uint64_t py_tstate(uint32_t tid) override;

 private:
  std::string task(uint32_t pid, uint32_t tid, const char* file) const;
  hal::BpfSession& session_;
  std::string proc_root_;
};

// The state letter of a /proc/PID/task/TID/stat line ('R', 'S', 'D', ...); 0 when malformed.
char stat_state(const std::string& stat_line);
// The user stack pointer of a /proc/PID/task/TID/syscall line ("NR A1..A6 SP PC", "-1 SP PC");
// 0 for "running" or a malformed line.
uint64_t syscall_sp(const std::string& syscall_line);

}  // namespace ingero::capture
