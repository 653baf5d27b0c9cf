#include "probe/probe_cost.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "probe/uprobe_multi.h"
#include "probe_cost.skel.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U  // Linux 6.3+: ask for an executable memfd explicitly
#endif

namespace ingero::hal {
namespace {

// uint64_t f(uint64_t x) { return x + 1; } with a frame-pointer prologue, as the vendor
// runtimes' exported functions start.
#if defined(__x86_64__)
constexpr uint8_t kCode[] = {
    0x55,                    // push %rbp
    0x48, 0x89, 0xe5,        // mov  %rsp,%rbp
    0x48, 0x8d, 0x47, 0x01,  // lea  0x1(%rdi),%rax
    0x5d,                    // pop  %rbp
    0xc3,                    // ret
};
#elif defined(__aarch64__)
constexpr uint32_t kInsns[] = {
    0xa9bf7bfd,  // stp x29, x30, [sp, #-16]!
    0x910003fd,  // mov x29, sp
    0x91000400,  // add x0, x0, #1
    0xa8c17bfd,  // ldp x29, x30, [sp], #16
    0xd65f03c0,  // ret
};
const uint8_t* const kCodeBytes = reinterpret_cast<const uint8_t*>(kInsns);
#else
#error "PrivateFunction: no machine code for this architecture"
#endif

std::pair<const uint8_t*, size_t> code() {
#if defined(__x86_64__)
  return {kCode, sizeof(kCode)};
#else
  return {kCodeBytes, sizeof(kInsns)};
#endif
}

Error sys_error(const std::string& what, int err) {
  return Error{what + ": " + std::strerror(err), err};
}

}  // namespace

Result<std::unique_ptr<PrivateFunction>> PrivateFunction::create() {
  std::unique_ptr<PrivateFunction> f(new PrivateFunction());
  f->fd_ = memfd_create("ingero-probe-cost", MFD_CLOEXEC | MFD_EXEC);
  if (f->fd_ < 0 && errno == EINVAL) f->fd_ = memfd_create("ingero-probe-cost", MFD_CLOEXEC);
  if (f->fd_ < 0) return sys_error("memfd_create for the private function", errno);
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<uint8_t> buf(size_t(page), 0);
  auto [bytes, len] = code();
  std::memcpy(buf.data(), bytes, len);
  if (write(f->fd_, buf.data(), buf.size()) != ssize_t(buf.size()))
    return sys_error("writing the private function", errno);
  f->map_ = mmap(nullptr, size_t(page), PROT_READ | PROT_EXEC, MAP_PRIVATE, f->fd_, 0);
  if (f->map_ == MAP_FAILED) {
    f->map_ = nullptr;
    return sys_error("mapping the private function executable (vm.memfd_noexec = 2 forbids it)",
                     errno);
  }
  f->fn_ = reinterpret_cast<Fn>(f->map_);
  f->path_ = "/proc/self/fd/" + std::to_string(f->fd_);
  if (f->call(41) != 42) return Error{"the private function returned a wrong value", EINVAL};
  return f;
}

PrivateFunction::~PrivateFunction() {
  if (map_) munmap(map_, size_t(sysconf(_SC_PAGESIZE)));
  if (fd_ >= 0) close(fd_);
}

Result<std::unique_ptr<MinimalProbePair>> MinimalProbePair::attach(const std::string& path,
                                                                   uint64_t file_offset,
                                                                   bool prefer_multi) {
  std::unique_ptr<MinimalProbePair> p(new MinimalProbePair());
  if (prefer_multi) {
    p->multi_ = true;
    if (auto st = p->load_and_attach(path, file_offset); st) return p;
    p.reset(new MinimalProbePair());
  }
  if (auto st = p->load_and_attach(path, file_offset); !st) return st.error();
  return p;
}

Status MinimalProbePair::load_and_attach(const std::string& path, uint64_t file_offset) {
  skel_ = probe_cost_bpf__open();
  if (!skel_) return sys_error("opening the minimal probe pair", errno);
  for (bpf_program* prog : {skel_->progs.min_session, skel_->progs.min_session_skip})
    bpf_program__set_autoload(prog, false);  // bench/min_probe's session modes only
  if (multi_) {
    for (bpf_program* prog : {skel_->progs.min_entry, skel_->progs.min_return})
      bpf_program__set_expected_attach_type(prog, bpf_attach_type(kBpfTraceUprobeMulti));
  }
  if (int err = probe_cost_bpf__load(skel_))
    return sys_error("loading the minimal probe pair", -err);
  for (bool ret : {false, true}) {
    bpf_program* prog = ret ? skel_->progs.min_return : skel_->progs.min_entry;
    if (multi_) {
      const uint64_t offsets[] = {file_offset};
      auto fd = link_uprobe_multi(bpf_program__fd(prog), path, offsets, {},
                                  ret ? UprobeMode::kReturn : UprobeMode::kEntry);
      if (!fd) return fd.error();
      links_.push_back(Link::from_fd(*fd));
      continue;
    }
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret);
    bpf_link* l = bpf_program__attach_uprobe_opts(prog, -1, path.c_str(), file_offset, &opts);
    if (!l) return sys_error("attaching the minimal probe pair to " + path, errno);
    links_.emplace_back(l);
  }
  return {};
}

MinimalProbePair::~MinimalProbePair() {
  links_.clear();
  if (skel_) probe_cost_bpf__destroy(skel_);
}

uint64_t MinimalProbePair::count(uint32_t key) const {
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return 0;
  std::vector<uint64_t> per_cpu(size_t(ncpu), 0);
  if (bpf_map__lookup_elem(skel_->maps.counts, &key, sizeof(key), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) != 0)
    return 0;
  uint64_t sum = 0;
  for (uint64_t v : per_cpu) sum += v;
  return sum;
}

uint64_t MinimalProbePair::entries() const { return count(0); }
uint64_t MinimalProbePair::returns() const { return count(1); }

}  // namespace ingero::hal
