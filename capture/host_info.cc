#include "capture/host_info.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace ingero::capture {

std::string read_small_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

HostInfo read_host_info() {
  HostInfo h;
  utsname u{};
  if (uname(&u) == 0) {
    h.hostname = u.nodename;
    h.kernel = u.release;
  }
  std::ifstream os("/etc/os-release");
  for (std::string line; std::getline(os, line);) {
    if (line.rfind("PRETTY_NAME=", 0) == 0) {
      h.os_release = line.substr(12);
      if (h.os_release.size() >= 2 && h.os_release.front() == '"')
        h.os_release = h.os_release.substr(1, h.os_release.size() - 2);
    }
  }
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0 && h.cpu_model.empty()) {
      auto c = line.find(':');
      if (c != std::string::npos) h.cpu_model = line.substr(c + 2);
    }
  }
  h.cpu_cores = int(sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream mem("/proc/meminfo");
  for (std::string line; std::getline(mem, line);) {
    if (line.rfind("MemTotal:", 0) == 0) h.mem_total_mib = std::stoll(line.substr(9)) / 1024;
  }
  return h;
}

uint64_t effective_caps() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

}  // namespace ingero::capture
