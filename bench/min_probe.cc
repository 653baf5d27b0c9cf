// Attaches the minimal counting probe(s) to LIB:SYMBOL[,SYMBOL...] and holds them until stdin
// closes.
//   min_probe LIB SYMBOLS entry|pair|session|session-skip|record|record-batch|record-call
// entry and pair are perf-event uprobes (an entry program; entry + return programs); session is
// one uprobe-session program that runs at entry and return (Linux 6.12+), session-skip the same
// program returning 1 at entry, so no return probe is armed. record is the smallest probe that
// records each launch, record-batch the same gathering launches in per-CPU batches of 32
// (RECORD_BATCH=N in the environment: N), record-call each timed call
// (bench/record_floor.bpf.c), their ring read on another thread by ingero's own consumer; at
// the end they print "records N refused M" on stderr (launches or calls). bench/run_benchmarks.sh
// and bench/launch_cost.sh compare them with ingero's own probes on the same function.
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdlib>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "hal/elf_symbols.h"
#include "probe/bpf_ring.h"
#include "probe/uprobe_multi.h"
#include "probe_cost.skel.h"
#include "record_floor.skel.h"

namespace {

// What the reader counted: the launches or calls recorded, and the sum of every word read.
struct Tally {
  uint64_t recorded = 0;
  uint64_t sum = 0;
  size_t batched_size = 0;  // record-batch: each launch's bytes in a batch; 0: one a record
};

// Counts a record's launches or call and reads every word of it, as a tracer's decoder would:
// the record's cache lines move to the reader's CPU.
void read_record(Tally& t, const void* data, size_t size) {
  const auto* w = static_cast<const uint64_t*>(data);
  for (size_t i = 0; i < size / 8; ++i) t.sum += w[i];
  t.recorded += t.batched_size ? size / t.batched_size : 1;
}

// The record modes: attaches record_launch, record_batch or record_call and reads their ring
// every 5 ms until stdin closes.
int run_record(const char* lib, const std::vector<uint64_t>& offsets, const std::string& mode) {
  auto* skel = record_floor_bpf__open();
  if (!skel) return 3;
  bpf_program* prog = mode == "record-call"    ? skel->progs.record_call
                      : mode == "record-batch" ? skel->progs.record_batch
                                               : skel->progs.record_launch;
  bool batch = mode == "record-batch";
  if (const char* n = getenv("RECORD_BATCH")) skel->rodata->batch_len = uint32_t(atoi(n));
  for (bpf_program* p :
       {skel->progs.record_call, skel->progs.record_launch, skel->progs.record_batch})
    bpf_program__set_autoload(p, p == prog);
  bpf_program__set_expected_attach_type(prog, bpf_attach_type(ingero::hal::kBpfTraceUprobeSession));
  if (record_floor_bpf__load(skel)) return 3;
  auto fd = ingero::hal::link_uprobe_multi(bpf_program__fd(prog), lib, offsets, {},
                                           ingero::hal::UprobeMode::kSession);
  if (!fd) {
    std::fprintf(stderr, "%s\n", fd.error().message.c_str());
    return 4;
  }
  Tally tally;
  tally.batched_size = batch ? 96 : 0;  // record_floor.bpf.c: struct launch_record
  // ingero's own consumer (probe/bpf_ring.h): the consumer's position given back a sixteenth
  // of the ring at a time, not after every record as libbpf's.
  auto ring = ingero::hal::BpfRing::open(bpf_map__fd(skel->maps.records));
  if (!ring) return 5;
  std::atomic<bool> stop{false};
  std::thread reader([&ring, &stop, &tally] {
    auto cb = [&tally](const void* data, size_t size) { read_record(tally, data, size); };
    while (!stop.load()) {
      (*ring)->consume(cb);
      usleep(5000);
    }
    (*ring)->consume(cb);
  });
  std::printf("attached\n");
  std::fflush(stdout);
  char buf[16];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  stop = true;
  reader.join();
  uint64_t refused = 0;
  int ncpu = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(size_t(ncpu > 0 ? ncpu : 1));
  uint32_t key = 1;
  if (bpf_map__lookup_elem(skel->maps.counts, &key, sizeof(key), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) == 0)
    for (uint64_t v : per_cpu) refused += v;
  if (batch) {  // what waits in each CPU's batch at the end
    size_t vs = bpf_map__value_size(skel->maps.batches);
    std::vector<char> all(vs * per_cpu.size());
    uint32_t zero = 0;
    if (bpf_map__lookup_elem(skel->maps.batches, &zero, sizeof(zero), all.data(), all.size(), 0) ==
        0)
      for (size_t c = 0; c < per_cpu.size(); ++c)
        tally.recorded += *reinterpret_cast<uint32_t*>(&all[c * vs]);
  }
  std::fprintf(stderr, "records %llu refused %llu\n",
               static_cast<unsigned long long>(tally.recorded),
               static_cast<unsigned long long>(refused));
  close(*fd);
  record_floor_bpf__destroy(skel);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::string mode = argv[3];
  auto idx = ingero::hal::SymbolIndex::load(argv[1]);
  if (!idx) return 2;
  std::vector<uint64_t> offsets;
  std::string list = argv[2];
  for (size_t at = 0; at <= list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    auto* s = (*idx)->find_function(list.substr(at, comma - at));
    if (!s) return 2;
    auto off = (*idx)->file_offset(s->value);
    if (!off) return 2;
    offsets.push_back(*off);
    at = comma + 1;
  }
  if (mode == "record" || mode == "record-call" || mode == "record-batch")
    return run_record(argv[1], offsets, mode);
  auto* skel = probe_cost_bpf__open();
  if (!skel) return 3;
  bool session = mode == "session" || mode == "session-skip";
  bpf_program* sess = mode == "session" ? skel->progs.min_session : skel->progs.min_session_skip;
  for (bpf_program* p : {skel->progs.min_session, skel->progs.min_session_skip})
    bpf_program__set_autoload(p, session && p == sess);
  if (session)
    bpf_program__set_expected_attach_type(sess,
                                          bpf_attach_type(ingero::hal::kBpfTraceUprobeSession));
  if (probe_cost_bpf__load(skel)) return 3;
  std::vector<bpf_link*> links;
  int session_fd = -1;
  if (session) {
    auto fd = ingero::hal::link_uprobe_multi(bpf_program__fd(sess), argv[1], offsets, {},
                                             ingero::hal::UprobeMode::kSession);
    if (!fd) {
      std::fprintf(stderr, "%s\n", fd.error().message.c_str());
      return 4;
    }
    session_fd = *fd;
  } else {
    for (uint64_t off : offsets) {
      LIBBPF_OPTS(bpf_uprobe_opts, eo, .retprobe = false);
      links.push_back(
          bpf_program__attach_uprobe_opts(skel->progs.min_entry, -1, argv[1], off, &eo));
      if (mode == "pair") {
        LIBBPF_OPTS(bpf_uprobe_opts, ro, .retprobe = true);
        links.push_back(
            bpf_program__attach_uprobe_opts(skel->progs.min_return, -1, argv[1], off, &ro));
      }
    }
    for (bpf_link* l : links)
      if (!l) return 4;
  }
  std::printf("attached\n");
  std::fflush(stdout);
  char buf[16];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  if (session_fd >= 0) close(session_fd);
  for (bpf_link* l : links) bpf_link__destroy(l);
  probe_cost_bpf__destroy(skel);
  return 0;
}
