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

struct LinkDeleter {
  void operator()(bpf_link* l) const;
};
using Link = std::unique_ptr<bpf_link, LinkDeleter>;

struct BpfConfig {
  uint32_t ringbuf_bytes = 64u << 20;  // power of two
  std::vector<uint32_t> pids;          // tgid filter; empty traces every process
  uint64_t cgroup_id = 0;              // 0 = any cgroup
  bool host_context = true;            // scheduler/memory/block/TCP programs
  bool follow_children = true;         // with a pid filter, children of traced pids join it
  bool selftest_only = false;          // load only what `ingero check` exercises
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

  // Thread-exit flushing and exec notification. Call once after open().
  Status attach_core();
  // The generic entry/return pair on one function, cookie = probe_id.
  Result<std::pair<Link, Link>> attach_call(const std::string& path, uint64_t file_offset,
                                            uint32_t probe_id, const ingero_recipe& recipe);
  // Link-map notifications from a dynamic loader's _dl_debug_state.
  Result<Link> attach_linkmap(const std::string& ldso_path, uint64_t file_offset);
  // The check self-test: attach to a function in this process and count hits.
  Result<Link> attach_selftest(const std::string& path, uint64_t file_offset);

  Status add_pid(uint32_t tgid);
  BpfStats stats() const;
  ingero_bpf* skeleton() { return skel_; }
  int events_fd() const;
  const BpfConfig& config() const { return config_; }

 private:
  explicit BpfSession(BpfConfig c) : config_(std::move(c)) {}
  BpfConfig config_;
  ingero_bpf* skel_ = nullptr;
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
