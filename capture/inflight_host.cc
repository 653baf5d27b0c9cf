#include "capture/inflight_host.h"

#include <dirent.h>

#include <cstdlib>
#include <sstream>

#include "capture/host_info.h"

namespace ingero::capture {

char stat_state(const std::string& line) {
  // "TID (COMM) S ...": the name may hold spaces and parentheses; the state follows the last ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size() || line[close + 1] != ' ') return 0;
  return line[close + 2];
}

uint64_t syscall_sp(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> tok;
  for (std::string t; in >> t;) tok.push_back(t);
  if (tok.size() < 3 || tok[0] == "running") return 0;
  const std::string& sp = tok[tok.size() - 2];
  char* end = nullptr;
  uint64_t v = std::strtoull(sp.c_str(), &end, 16);
  return end && *end == 0 ? v : 0;
}

std::string ProcInflightHost::task(uint32_t pid, uint32_t tid, const char* file) const {
  return proc_root_ + "/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/" + file;
}

Status ProcInflightHost::frames(std::vector<ingero_inflight_rec>& out) {
  return session_.read_inflight(out);
}

std::optional<hal::ThreadSched> ProcInflightHost::sched(uint32_t tid) {
  return session_.thread_sched(tid);
}

char ProcInflightHost::proc_state(uint32_t pid, uint32_t tid) {
  return stat_state(read_small_file(task(pid, tid, "stat")));
}

std::vector<uint32_t> ProcInflightHost::threads(uint32_t pid) {
  std::vector<uint32_t> out;
  DIR* d = opendir((proc_root_ + "/" + std::to_string(pid) + "/task").c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    unsigned long v = std::strtoul(e->d_name, &end, 10);
    if (end && *end == 0 && v) out.push_back(uint32_t(v));
  }
  closedir(d);
  return out;
}

uint64_t ProcInflightHost::blocked_sp(uint32_t pid, uint32_t tid) {
  return syscall_sp(read_small_file(task(pid, tid, "syscall")));
}

std::string ProcInflightHost::comm(uint32_t pid, uint32_t tid) {
  return read_small_file(task(pid, tid, "comm"));
}

uint64_t ProcInflightHost::py_tstate(uint32_t tid) { return session_.thread_py_tstate(tid); }

}  // namespace ingero::capture
