#include "kernelside/cpu_sampler.h"

#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "ingero.skel.h"

namespace ingero::kernelside {
namespace {

// "0-3,5,7-8" -> the CPUs listed.
std::vector<int> online_cpus() {
  std::vector<int> out;
  std::ifstream f("/sys/devices/system/cpu/online");
  std::string list;
  std::getline(f, list);
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string part =
        list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = part.find('-');
    int lo = std::stoi(part.substr(0, dash));
    int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

CpuSampler::~CpuSampler() { links_.clear(); }

Status CpuSampler::start(int hz) {
  bpf_program* prog = session_.skeleton()->progs.ingero_cpu_sample;
  for (int cpu : online_cpus()) {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.freq = 1;
    attr.sample_freq = uint64_t(hz);
    int fd = int(syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      int err = errno;
      links_.clear();
      return Error{
          "opening the CPU-clock sampler on CPU " + std::to_string(cpu) + ": " + std::strerror(err),
          err};
    }
    bpf_link* l = bpf_program__attach_perf_event(prog, fd);
    if (!l) {
      int err = errno;
      close(fd);  // no link took it
      links_.clear();
      return Error{"attaching the CPU-clock sampler on CPU " + std::to_string(cpu) + ": " +
                       std::strerror(err),
                   err};
    }
    links_.emplace_back(l);
  }
  return {};
}

}  // namespace ingero::kernelside
