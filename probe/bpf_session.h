// Owns the one BPF object (bpf/calls.bpf.c, stacks.bpf.c and host.bpf.c linked together) and
// every kernel object made from it.
//
// Lifecycle, in the libbpf order: open() -> configure (globals, map sizes, which programs
// load) -> load -> attach. Everything is RAII: destroying a Link detaches its probe, and
// destroying the session detaches everything and frees the maps; destructors log, never
// throw.
//
// Call probes attach per library *file* (pid -1): every process mapping the file, now or
// later, is covered. Filtering by pid or cgroup happens inside BPF. The host-context programs
// are attached by kernelside/ (HostPrograms), the on-CPU sampler by kernelside/CpuSampler.
//
// How call probes attach, best first (the kernel decides which load succeeds):
//   session     one uprobe-session program per file (Linux 6.12+): a nested call's entry
//               arms no return probe at all;
//   multi pair  an entry and a return uprobe_multi link per file (Linux 6.6+);
//   perf pair   two perf-event uprobes per function (older kernels; detaching is slow).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "ingero_records.h"

struct bpf_link;
struct ingero_bpf;  // generated skeleton
struct ring_buffer;

namespace ingero::hal {

// One attachment: a libbpf link, or a raw BPF link fd (uprobe_multi). Detaches on destruction.
class Link {
 public:
  Link() = default;
  explicit Link(bpf_link* l) : link_(l) {}
  static Link from_fd(int fd) {
    Link l;
    l.fd_ = fd;
    return l;
  }
  // A perf-event uprobe's link: the kernel frees such probes one at a time at their last close
  // (probe/link_closer.h, hand_off_perf_events).
  static Link perf_uprobe(bpf_link* l) {
    Link k(l);
    k.perf_uprobe_ = true;
    return k;
  }
  Link(Link&& o) noexcept : link_(o.link_), fd_(o.fd_), perf_uprobe_(o.perf_uprobe_) {
    o.link_ = nullptr;
    o.fd_ = -1;
  }
  Link& operator=(Link&& o) noexcept {
    std::swap(link_, o.link_);
    std::swap(fd_, o.fd_);
    std::swap(perf_uprobe_, o.perf_uprobe_);
    return *this;
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  ~Link();
  explicit operator bool() const { return link_ || fd_ >= 0; }
  int fd() const;  // the link's file descriptor, -1 when empty
  bool perf_uprobe() const { return perf_uprobe_ && link_; }

 private:
  bpf_link* link_ = nullptr;
  int fd_ = -1;
  bool perf_uprobe_ = false;
};

// One function to trace in one file.
struct CallSite {
  uint64_t file_offset = 0;
  uint32_t probe_id = 0;
  ingero_recipe recipe{};
};

struct AttachResult {
  std::vector<Link> links;
  std::vector<std::pair<size_t, std::string>> failed;  // index into sites, reason
};

// Ring buffer sizes in bytes (powers of two). Each is mapped twice by the reader (wrap
// around), so it counts twice in RSS once written through.
struct RingSizes {
  uint32_t calls = 0;  // call records and library-watch notifications
  uint32_t aux = 0;    // stacks, Python code objects, on-CPU samples
  uint32_t host = 0;   // scheduler, lifecycle, block I/O, TCP
};
// The default for a machine with `ncpus` CPUs: the calls ring grows with the CPUs that can
// call at once (1 MiB each, 8..64 MiB); aux and host take a quarter of it (2..16 MiB).
// `calls_mb` (a power of two, or 0 for the default) sets the calls ring and scales the rest.
RingSizes ring_sizes(int ncpus, uint32_t calls_mb = 0);

enum class CallAttach { kSession, kMultiPair, kPerfPair };
const char* call_attach_name(CallAttach a);  // "uprobe session", "uprobe_multi pair", ...

struct BpfConfig {
  RingSizes rings;                // 0 fields: ring_sizes(this machine)
  std::vector<uint32_t> pids;     // tgid filter; empty traces every process
  uint64_t cgroup_id = 0;         // 0 = any cgroup
  bool host_context = true;       // scheduler/memory/block/TCP programs
  bool follow_children = true;    // with a pid filter, children of traced pids join it
  bool selftest_only = false;     // load only what `ingero check` exercises
  bool stacks = false;            // capture user stacks (and Python frames) at return
  bool cpu_samples = false;       // load the on-CPU sampling program
  uint32_t stack_site_walks = 2;  // calls per call site that walk their stack
  uint64_t stack_walk_interval_ns = 20'000'000;  // then one walk per thread per interval
  uint64_t stack_slow_ns = 1000000;  // calls at least this slow always get their own stack
  // Launches are emitted at entry; one in this many per thread is timed through its return
  // (1: every launch timed, as a call of any other kind; 0: none).
  uint32_t launch_timing_every = 32;
  // A kernel-name look-up whose answer went out less than this long ago ships nothing
  // (bpf/records_call.h, INGERO_NAME_ONCE).
  uint64_t name_repeat_ns = 1'000'000'000;
  // Untimed launches wait in their CPU's batch and reach the calls ring ~30 at a time
  // (bpf/launch_batch.h): with the host context (whose switch program ships
  // a CPU's batch when its task leaves). Whoever turns it on ships the batches left waiting
  // (BpfSession::ship_launch_batches) while it reads the ring, and all of them at the end.
  bool launch_batches = false;
  // Keep what the kernel's verifier says of each program it loads (instructions it walked, its
  // time): a session's fixed cost is mostly verification (docs/performance.md).
  bool verifier_stats = false;
  // The best attach mode the kernel loads, unless the environment narrows it for tests and
  // benchmarks: INGERO_CALL_ATTACH=session|multi|perf (INGERO_NO_UPROBE_MULTI=1 means perf).
};

// What the scheduler programs last recorded about a thread (host.bpf.c, the offcpu map).
struct ThreadSched {
  uint64_t off_since_ns = 0;  // off a CPU since (CLOCK_MONOTONIC); 0: on a CPU now
  uint32_t state = 0;         // the task state it left in: 0 preempted, 1 sleeping, 2 D
};

struct BpfStats {
  uint64_t v[INGERO_STAT_MAX] = {};
  uint64_t operator[](ingero_stat s) const { return v[s]; }
};

// Mounts tracefs at /sys/kernel/tracing if it is not mounted. Returns whether it is there.
Result<bool> ensure_tracefs();
// True if the kernel exposes the uprobe perf PMU (attach needs no tracefs).
bool has_uprobe_pmu();

// What the kernel's verifier reported of one program it loaded (BpfConfig::verifier_stats).
struct ProgramVerification {
  std::string name;
  uint64_t insns = 0;  // instructions it walked ("processed N insns"): its work
  uint64_t us = 0;     // its time
};

class BpfSession {
 public:
  static Result<std::unique_ptr<BpfSession>> open(const BpfConfig& config);
  ~BpfSession();
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  // The call side's tracepoints: thread-exit flushing, children joining a pid filter, exec
  // notification. Call once after open(); reports each one (kernelside::HostPrograms attaches
  // the host context).
  std::vector<std::pair<std::string, Status>> attach_core();
  // The call program(s) on every site of one file, cookie = probe_id. A site the kernel refuses
  // is reported in `failed`; the others stay attached. `entries_only` (without sessions): no
  // return probe; attach_returns adds them (launch timing windows, probe/launch_windows.h).
  AttachResult attach_calls(const std::string& path, const std::vector<CallSite>& sites,
                            bool entries_only = false);
  // Without sessions: the return probes of `sites`, attached by attach_calls at entry only.
  Result<std::vector<Link>> attach_returns(const std::string& path,
                                           const std::vector<CallSite>& sites);
  // Sets the timing window of launch probes (ingero_recipe.window: odd while their return
  // probes are attached).
  Status set_launch_window(const std::vector<uint32_t>& probe_ids, uint16_t window);
  // Retires probes being detached. Before their links go (`gone` false): no call enters
  // through them any more, a call in flight through them still returns. Once the links are
  // gone: a thread still inside a call entered through one ships it untimed at its next call,
  // and the in-flight iterator skips it.
  Status retire_probes(const std::vector<uint32_t>& probe_ids, bool gone);
  CallAttach call_attach() const { return attach_; }
  bool uses_uprobe_multi() const { return attach_ != CallAttach::kPerfPair; }
  // Link-map notifications from a dynamic loader's _dl_debug_state.
  // `cookie`: INGERO_LINKMAP_STATE_KNOWN and where _r_debug lies from the probed function, or 0.
  Result<Link> attach_linkmap(const std::string& ldso_path, uint64_t file_offset,
                              uint64_t cookie = 0);
  // The check self-test: attach to a function of this process, for this process alone, and
  // count hits.
  Result<Link> attach_selftest(const std::string& path, uint64_t file_offset);

  Status add_pid(uint32_t tgid);
  // The processes the pid filter lets in now (those given, and the children that joined); empty
  // when there is no pid filter.
  std::vector<int> filtered_pids() const;
  // Whether a trace filtered by pid has no traced process left alive (a process leaves the
  // filter when its last thread exits): one look at the map, not a walk.
  bool no_pid_left() const;
  // Where the Python interpreter of `tgid` keeps its frames (nullptr: forget the process).
  Status set_python(uint32_t tgid, const ingero_py_config* config);
  BpfStats stats() const;
  // Kernel-name look-ups held back in BPF (they named nothing new), by probe: one count for each
  // of `probe_ids` (0 where it cannot be read).
  std::vector<uint64_t> names_held_back(const std::vector<uint32_t>& probe_ids) const;
  // The calls in flight now: appends one record per thread inside a traced call (its
  // outermost frame), read through the ingero_inflight iterator over the thread table, which
  // is attached on first use, or, where the kernel refused to load that iterator, from the
  // thread table by look-ups (probe/inflight_table.h). An Error when they cannot be read.
  Status read_inflight(std::vector<ingero_inflight_rec>& out);
  // The kernel refused the map-element iterator: read_inflight looks the threads up.
  bool inflight_by_lookup() const { return inflight_by_lookup_; }
  // Ships the untimed launches waiting in CPUs' batches (BpfConfig::launch_batches): those whose
  // first launch is at least `waited_ns` old, or every one with 0, by running the shipping
  // program on their CPUs. A batch that cannot be shipped on its CPU (it went offline) is
  // handed to `leftover` as the ring would hand it, when given: at the end, once no probe is
  // attached. Returns the batches shipped or handed over; an Error when the batches cannot be
  // read.
  Result<int> ship_launch_batches(uint64_t waited_ns,
                                  const std::function<void(const void*, size_t)>& leftover = {});
  bool launch_batches() const { return batching_; }
  // The scheduler's last record of a thread; nullopt when it has none (not switched since
  // tracing began, or no host context).
  std::optional<ThreadSched> thread_sched(uint32_t tid) const;
  // A thread's PyThreadState as the stack walks last found it; 0 when unknown.
  uint64_t thread_py_tstate(uint32_t tid) const;
  ingero_bpf* skeleton() { return skel_; }
  int calls_fd() const;
  int aux_fd() const;
  int host_fd() const;
  // The flag the reader sets while it is not waiting on the rings, so that the programs spare
  // it a wake-up (bpf/shared.bpf.h: ingero_wakeup_flags). For RingReader::set_busy_flag.
  volatile uint32_t* reader_busy_flag();
  int pid_stats_fd() const;  // per-process host aggregates (kernelside::ProcessStatsReader)
  const BpfConfig& config() const { return config_; }
  // Each loaded program's verification, in the object's order; empty unless
  // BpfConfig::verifier_stats.
  const std::vector<ProgramVerification>& verification() const { return verification_; }

 private:
  explicit BpfSession(BpfConfig c, CallAttach a) : config_(std::move(c)), attach_(a) {}
  Status load();
  // Opens, configures and loads the programs; the in-flight iterator among them or not.
  Status load_object(bool inflight_iter);
  enum class Ends { kBoth, kEntry, kReturn };  // which probes of a pair
  Result<std::vector<Link>> attach_sites(const std::string& path,
                                         const std::vector<CallSite>& sites,
                                         const std::vector<size_t>& which, Ends ends);
  // Reads, changes and writes back the recipes of `probe_ids`.
  Status update_recipes(const std::vector<uint32_t>& probe_ids,
                        const std::function<void(ingero_recipe&)>& change, const char* what);

  BpfConfig config_;
  CallAttach attach_;
  ingero_bpf* skel_ = nullptr;
  std::vector<Link> core_links_;
  Link inflight_iter_;
  bool batching_ = false;  // the programs batch launches (BpfConfig::launch_batches, in effect)
  bool inflight_by_lookup_ = false;  // loaded without the in-flight iterator
  std::vector<ProgramVerification> verification_;
};

}  // namespace ingero::hal
