// Owns the one BPF object (bpf/ingero.bpf.c) and every kernel object made from it.
//
// Lifecycle, in the libbpf order: open() -> configure (globals, map sizes, which programs
// load) -> load -> attach. Everything is RAII: destroying a Link detaches its probe, and
// destroying the session detaches everything and frees the maps; destructors log, never
// throw.
//
// Attaching a uprobe pair is per library *file* (pid -1): every process mapping the file,
// now or later, is covered. Filtering by pid or cgroup happens inside BPF.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  Link(Link&& o) noexcept : link_(o.link_), fd_(o.fd_) {
    o.link_ = nullptr;
    o.fd_ = -1;
  }
  Link& operator=(Link&& o) noexcept {
    std::swap(link_, o.link_);
    std::swap(fd_, o.fd_);
    return *this;
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;
  ~Link();
  explicit operator bool() const { return link_ || fd_ >= 0; }

 private:
  bpf_link* link_ = nullptr;
  int fd_ = -1;
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

struct BpfConfig {
  uint32_t ringbuf_bytes = 16u << 20;  // power of two; mapped twice, so counts 2x in RSS
  std::vector<uint32_t> pids;          // tgid filter; empty traces every process
  uint64_t cgroup_id = 0;              // 0 = any cgroup
  bool host_context = true;            // scheduler/memory/block/TCP programs
  bool follow_children = true;         // with a pid filter, children of traced pids join it
  bool selftest_only = false;          // load only what `ingero check` exercises
  bool stacks = false;                 // capture user stacks (and Python frames) at return
  uint32_t stack_samples = 100;        // calls per (process, stack) that ship the stack
  uint64_t stack_slow_ns = 1000000;    // calls at least this slow always ship theirs
};

struct BpfStats {
  uint64_t v[INGERO_STAT_MAX] = {};
  uint64_t operator[](ingero_stat s) const { return v[s]; }
};

// Mounts tracefs at /sys/kernel/tracing if it is not mounted. Returns whether it is there.
Result<bool> ensure_tracefs();
// True if the kernel exposes the uprobe perf PMU (attach needs no tracefs).
bool has_uprobe_pmu();

class BpfSession {
 public:
  static Result<std::unique_ptr<BpfSession>> open(const BpfConfig& config);
  ~BpfSession();
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  // Thread-exit flushing and exec notification, plus the host-context tracepoints. Call once
  // after open(). Fails on the first tracepoint the kernel refuses.
  Status attach_core();
  // The same, attaching every tracepoint it can and reporting each one ("sched_switch" ->
  // ok or the error). Used by `ingero check`.
  std::vector<std::pair<std::string, Status>> attach_core_report();
  // The generic entry/return pair on every site of one file, cookie = probe_id. With
  // uprobe_multi (Linux 6.6+) that is two links per file, attached and detached in one
  // kernel operation each; otherwise two perf-event uprobes per site. A site the kernel
  // refuses is reported in `failed`; the others stay attached.
  AttachResult attach_calls(const std::string& path, const std::vector<CallSite>& sites);
  bool uses_uprobe_multi() const { return multi_; }
  // Link-map notifications from a dynamic loader's _dl_debug_state.
  Result<Link> attach_linkmap(const std::string& ldso_path, uint64_t file_offset);
  // The check self-test: attach to a function in this process and count hits.
  Result<Link> attach_selftest(const std::string& path, uint64_t file_offset);

  Status add_pid(uint32_t tgid);
  // Where the Python interpreter of `tgid` keeps its frames (nullptr: forget the process).
  Status set_python(uint32_t tgid, const ingero_py_config* config);
  BpfStats stats() const;
  ingero_bpf* skeleton() { return skel_; }
  int events_fd() const;
  int pid_stats_fd() const;  // per-process host aggregates (kernelside::ProcessStatsReader)
  const BpfConfig& config() const { return config_; }

 private:
  explicit BpfSession(BpfConfig c) : config_(std::move(c)) {}
  Status load();
  Result<Link> attach_one(const std::string& path, const CallSite& site, bool retprobe);
  Result<Link> attach_multi(const std::string& path, const std::vector<CallSite>& sites,
                            const std::vector<size_t>& which, bool retprobe);

  BpfConfig config_;
  ingero_bpf* skel_ = nullptr;
  bool multi_ = false;
  std::vector<Link> core_links_;
};

// Polls the session's ring buffer, handing each record to `on_record`.
class RingReader {
 public:
  using Callback = std::function<void(const void* data, size_t size)>;
  static Result<std::unique_ptr<RingReader>> create(int map_fd, Callback cb);
  ~RingReader();
  // Waits up to timeout_ms; returns records consumed or an Error (EINTR is not an error).
  Result<int> poll(int timeout_ms);
  // Consumes everything currently queued without waiting.
  Result<int> drain();

 private:
  RingReader() = default;
  static int trampoline(void* ctx, void* data, size_t size);
  ring_buffer* rb_ = nullptr;
  Callback cb_;
};

}  // namespace ingero::hal
