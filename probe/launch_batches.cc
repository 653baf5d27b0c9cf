// Shipping the launches that wait in CPUs' batches (bpf/launch_batch.h): BpfSession's part
// that reads the batches and runs the shipping program on a CPU.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "hal/clock.h"
#include "ingero.skel.h"
#include "probe/bpf_session.h"

namespace ingero::hal {

Result<int> BpfSession::ship_launch_batches(
    uint64_t waited_ns, const std::function<void(const void*, size_t)>& leftover) {
  if (!batching_) return 0;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return Error{"counting the CPUs", -ncpu};
  // A per-CPU value is read for every possible CPU at once, each rounded up to 8 bytes.
  static_assert(sizeof(ingero_launch_batch) % 8 == 0);
  std::vector<ingero_launch_batch> batches(static_cast<size_t>(ncpu));
  uint32_t zero = 0;
  if (bpf_map__lookup_elem(skel_->maps.launch_batches, &zero, sizeof(zero), batches.data(),
                           batches.size() * sizeof(ingero_launch_batch), 0) != 0)
    return Error::sys("reading the launch batches", errno);
  uint64_t now = uint64_t(mono_now_ns());
  int prog = bpf_program__fd(skel_->progs.ingero_ship_launches);
  int shipped = 0;
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    const ingero_launch_batch& b = batches[size_t(cpu)];
    if (!b.rec.count) continue;
    uint64_t first = 0;  // its first launch's start (read while it may be written: a hint)
    std::memcpy(&first, b.data + offsetof(ingero_launch_rec, start_ns), sizeof(first));
    if (waited_ns && first + waited_ns > now) continue;
    LIBBPF_OPTS(bpf_test_run_opts, run, .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = uint32_t(cpu));
    if (bpf_prog_test_run_opts(prog, &run) == 0) {
      ++shipped;
    } else if (leftover && b.rec.bytes <= sizeof(b.data)) {
      // Its CPU runs nothing now: what was read is the batch's record, whole.
      leftover(&b.rec, sizeof(b.rec) + b.rec.bytes);
      ++shipped;
    }
  }
  return shipped;
}

}  // namespace ingero::hal
