#include "hal/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "ingero.skel.h"

namespace ingero::hal {

Link::~Link() {
  if (link_ && bpf_link__destroy(link_) != 0)
    std::fprintf(stderr, "ingero: warning: detaching a probe failed\n");
  if (fd_ >= 0) close(fd_);
}

bool has_uprobe_pmu() {
  struct stat st {};
  return stat("/sys/bus/event_source/devices/uprobe/type", &st) == 0;
}

Result<bool> ensure_tracefs() {
  std::ifstream mounts("/proc/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    if (line.find(" tracefs ") != std::string::npos) return true;
  }
  if (mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, nullptr) != 0)
    return Error::sys("mount tracefs at /sys/kernel/tracing", errno);
  return true;
}

namespace {

int libbpf_quiet(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_WARN && getenv("INGERO_LIBBPF_DEBUG") == nullptr) return 0;
  if (level == LIBBPF_DEBUG && getenv("INGERO_LIBBPF_DEBUG") == nullptr) return 0;
  return vfprintf(stderr, fmt, args);
}

Error bpf_error(const std::string& what, int err) {
  if (err < 0) err = -err;
  std::string hint;
  if (err == EPERM || err == EACCES)
    hint = " (tracing needs root, or CAP_BPF and CAP_PERFMON; run `ingero check`)";
  return Error{what + ": " + std::strerror(err) + hint, err};
}

}  // namespace

// Not in Debian 12's UAPI headers (Linux 6.1); stable kernel ABI since 6.6.
constexpr int kBpfTraceUprobeMulti = 48;
constexpr uint32_t kUprobeMultiReturn = 1;

// BPF_LINK_CREATE attribute layout for uprobe_multi, from linux/bpf.h (6.6+).
struct UprobeMultiAttr {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
  uint8_t pad[128 - 60];
};
static_assert(offsetof(UprobeMultiAttr, cnt) == 48);

Result<std::unique_ptr<BpfSession>> BpfSession::open(const BpfConfig& config) {
  libbpf_set_print(libbpf_quiet);
  // Prefer uprobe_multi; a kernel that does not know it rejects the load, and the classic
  // per-function perf-event uprobes are used instead.
  std::unique_ptr<BpfSession> s(new BpfSession(config));
  s->multi_ = getenv("INGERO_NO_UPROBE_MULTI") == nullptr;
  if (s->multi_) {
    if (auto st = s->load(); st) return s;
    s.reset(new BpfSession(config));
    s->multi_ = false;
  }
  if (auto st = s->load(); !st) return st.error();
  return s;
}

Status BpfSession::load() {
  const BpfConfig& config = config_;
  BpfSession* s = this;
  s->skel_ = ingero_bpf__open();
  if (!s->skel_) return bpf_error("opening the BPF object", errno);
  auto* sk = s->skel_;
  sk->rodata->filter_pids_enabled = config.pids.empty() ? 0 : 1;
  if (multi_) {
    bpf_program__set_expected_attach_type(sk->progs.ingero_entry,
                                          bpf_attach_type(kBpfTraceUprobeMulti));
    bpf_program__set_expected_attach_type(sk->progs.ingero_return,
                                          bpf_attach_type(kBpfTraceUprobeMulti));
  }
  sk->rodata->filter_cgroup_id = config.cgroup_id;
  sk->rodata->follow_children = config.follow_children ? 1 : 0;
  sk->rodata->host_context = config.host_context ? 1 : 0;
  sk->rodata->stacks_enabled = config.stacks ? 1 : 0;
  sk->rodata->stack_samples = config.stack_samples;
  sk->rodata->stack_slow_ns = config.stack_slow_ns;
  if (!config.host_context) {
    for (bpf_program* p :
         {sk->progs.ingero_sched_switch, sk->progs.ingero_sched_wakeup, sk->progs.ingero_oom_victim,
          sk->progs.ingero_page_alloc, sk->progs.ingero_block_issue,
          sk->progs.ingero_block_complete, sk->progs.ingero_tcp_retransmit})
      bpf_program__set_autoload(p, false);
  }
  if (config.ringbuf_bytes) bpf_map__set_max_entries(sk->maps.events, config.ringbuf_bytes);

  if (config.selftest_only) {
    for (bpf_program* p = bpf_object__next_program(sk->obj, nullptr); p;
         p = bpf_object__next_program(sk->obj, p))
      bpf_program__set_autoload(p, p == sk->progs.ingero_selftest);
  }
  if (int err = ingero_bpf__load(sk)) return bpf_error("loading the BPF programs", err);
  for (uint32_t pid : config.pids) {
    if (auto st = s->add_pid(pid); !st) return st;
  }
  return {};
}

BpfSession::~BpfSession() {
  core_links_.clear();
  if (skel_) ingero_bpf__destroy(skel_);
}

std::vector<std::pair<std::string, Status>> BpfSession::attach_core_report() {
  std::vector<std::pair<std::string, Status>> out;
  struct {
    bpf_program* prog;
    const char* name;
    bool host;
  } all[] = {{skel_->progs.ingero_thread_exit, "sched_process_exit", false},
             {skel_->progs.ingero_exec, "sched_process_exec", false},
             {skel_->progs.ingero_fork, "sched_process_fork", false},
             {skel_->progs.ingero_sched_switch, "sched_switch", true},
             {skel_->progs.ingero_sched_wakeup, "sched_wakeup", true},
             {skel_->progs.ingero_oom_victim, "mark_victim", true},
             {skel_->progs.ingero_page_alloc, "mm_page_alloc", true},
             {skel_->progs.ingero_block_issue, "block_rq_issue", true},
             {skel_->progs.ingero_block_complete, "block_rq_complete", true},
             {skel_->progs.ingero_tcp_retransmit, "tcp_retransmit_skb", true}};
  for (auto& a : all) {
    if (a.host && !config_.host_context) continue;
    bpf_link* l = bpf_program__attach(a.prog);
    if (!l) {
      out.push_back({a.name, bpf_error(std::string("attaching tp_btf/") + a.name, errno)});
      continue;
    }
    core_links_.emplace_back(l);
    out.push_back({a.name, Status{}});
  }
  return out;
}

Status BpfSession::attach_core() {
  auto attach = [&](bpf_program* p, const char* what) -> Status {
    bpf_link* l = bpf_program__attach(p);
    if (!l) return bpf_error(std::string("attaching ") + what, errno);
    core_links_.emplace_back(l);
    return {};
  };
  if (auto st = attach(skel_->progs.ingero_thread_exit, "tp_btf/sched_process_exit"); !st)
    return st;
  if (auto st = attach(skel_->progs.ingero_exec, "tp_btf/sched_process_exec"); !st) return st;
  if (auto st = attach(skel_->progs.ingero_fork, "tp_btf/sched_process_fork"); !st) return st;
  if (!config_.host_context || config_.selftest_only) return {};
  struct {
    bpf_program* prog;
    const char* name;
  } host[] = {{skel_->progs.ingero_sched_switch, "tp_btf/sched_switch"},
              {skel_->progs.ingero_sched_wakeup, "tp_btf/sched_wakeup"},
              {skel_->progs.ingero_oom_victim, "tp_btf/mark_victim"},
              {skel_->progs.ingero_page_alloc, "tp_btf/mm_page_alloc"},
              {skel_->progs.ingero_block_issue, "tp_btf/block_rq_issue"},
              {skel_->progs.ingero_block_complete, "tp_btf/block_rq_complete"},
              {skel_->progs.ingero_tcp_retransmit, "tp_btf/tcp_retransmit_skb"}};
  for (auto& h : host) {
    if (auto st = attach(h.prog, h.name); !st) return st;
  }
  return {};
}

Result<Link> BpfSession::attach_one(const std::string& path, const CallSite& site, bool retprobe) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = site.probe_id, .retprobe = retprobe);
  bpf_link* l = bpf_program__attach_uprobe_opts(
      retprobe ? skel_->progs.ingero_return : skel_->progs.ingero_entry, -1, path.c_str(),
      site.file_offset, &opts);
  if (!l) return bpf_error(std::string(retprobe ? "uretprobe" : "uprobe") + " on " + path, errno);
  return Link(l);
}

Result<Link> BpfSession::attach_multi(const std::string& path, const std::vector<CallSite>& sites,
                                      const std::vector<size_t>& which, bool retprobe) {
  std::vector<uint64_t> offsets, cookies;
  for (size_t i : which) {
    offsets.push_back(sites[i].file_offset);
    cookies.push_back(sites[i].probe_id);
  }
  UprobeMultiAttr attr{};
  attr.prog_fd =
      uint32_t(bpf_program__fd(retprobe ? skel_->progs.ingero_return : skel_->progs.ingero_entry));
  attr.attach_type = kBpfTraceUprobeMulti;
  attr.path = uint64_t(uintptr_t(path.c_str()));
  attr.offsets = uint64_t(uintptr_t(offsets.data()));
  attr.cookies = uint64_t(uintptr_t(cookies.data()));
  attr.cnt = uint32_t(offsets.size());
  attr.multi_flags = retprobe ? kUprobeMultiReturn : 0;
  int fd = int(syscall(__NR_bpf, 28 /* BPF_LINK_CREATE */, &attr, sizeof(attr)));
  if (fd < 0)
    return bpf_error(std::string(retprobe ? "uretprobe" : "uprobe") + " on " + path, errno);
  return Link::from_fd(fd);
}

AttachResult BpfSession::attach_calls(const std::string& path, const std::vector<CallSite>& sites) {
  AttachResult out;
  std::vector<size_t> ok;
  for (size_t i = 0; i < sites.size(); ++i) {
    uint32_t id = sites[i].probe_id;
    if (id >= INGERO_MAX_PROBES) {
      out.failed.push_back(
          {i, "probe table full (" + std::to_string(INGERO_MAX_PROBES) + " probes)"});
      continue;
    }
    if (bpf_map__update_elem(skel_->maps.recipes, &id, sizeof(id), &sites[i].recipe,
                             sizeof(sites[i].recipe), BPF_ANY) != 0) {
      out.failed.push_back({i, bpf_error("writing the probe recipe", errno).message});
      continue;
    }
    ok.push_back(i);
  }
  if (ok.empty()) return out;
  if (multi_) {
    auto e = attach_multi(path, sites, ok, false);
    auto r = e ? attach_multi(path, sites, ok, true) : Result<Link>(e.error());
    if (e && r) {
      out.links.push_back(std::move(*e));
      out.links.push_back(std::move(*r));
      return out;
    }
    // One bad offset fails the whole batch: isolate it by attaching the sites one by one.
    for (size_t i : ok) {
      auto e1 = attach_multi(path, sites, {i}, false);
      auto r1 = e1 ? attach_multi(path, sites, {i}, true) : Result<Link>(e1.error());
      if (!e1 || !r1) {
        out.failed.push_back({i, (!e1 ? e1.error() : r1.error()).message});
        continue;
      }
      out.links.push_back(std::move(*e1));
      out.links.push_back(std::move(*r1));
    }
    return out;
  }
  for (size_t i : ok) {
    auto e = attach_one(path, sites[i], false);
    auto r = e ? attach_one(path, sites[i], true) : Result<Link>(e.error());
    if (!e || !r) {
      out.failed.push_back({i, (!e ? e.error() : r.error()).message});
      continue;
    }
    out.links.push_back(std::move(*e));
    out.links.push_back(std::move(*r));
  }
  return out;
}

Result<Link> BpfSession::attach_linkmap(const std::string& ldso_path, uint64_t file_offset) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = false);
  bpf_link* l = bpf_program__attach_uprobe_opts(skel_->progs.ingero_linkmap, -1, ldso_path.c_str(),
                                                file_offset, &opts);
  if (!l) return bpf_error("uprobe on " + ldso_path + " _dl_debug_state", errno);
  return Link(l);
}

Result<Link> BpfSession::attach_selftest(const std::string& path, uint64_t file_offset) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = false);
  bpf_link* l = bpf_program__attach_uprobe_opts(skel_->progs.ingero_selftest, -1, path.c_str(),
                                                file_offset, &opts);
  if (!l) return bpf_error("self-test uprobe", errno);
  return Link(l);
}

Status BpfSession::add_pid(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.pid_filter, &tgid, sizeof(tgid), &one, sizeof(one),
                           BPF_ANY) != 0)
    return bpf_error("adding pid " + std::to_string(tgid) + " to the filter", errno);
  return {};
}

BpfStats BpfSession::stats() const {
  BpfStats out;
  int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0) return out;
  std::vector<uint64_t> vals(static_cast<size_t>(ncpu));
  for (uint32_t k = 0; k < INGERO_STAT_MAX; ++k) {
    if (bpf_map__lookup_elem(skel_->maps.stats, &k, sizeof(k), vals.data(),
                             vals.size() * sizeof(uint64_t), 0) != 0)
      continue;
    for (uint64_t v : vals) out.v[k] += v;
  }
  return out;
}

int BpfSession::events_fd() const { return bpf_map__fd(skel_->maps.events); }

Status BpfSession::set_python(uint32_t tgid, const ingero_py_config* config) {
  int fd = bpf_map__fd(skel_->maps.py_procs);
  if (!config) {
    bpf_map_delete_elem(fd, &tgid);
    return {};
  }
  if (bpf_map_update_elem(fd, &tgid, config, BPF_ANY) != 0)
    return bpf_error("configuring Python frames for pid " + std::to_string(tgid), errno);
  return {};
}
int BpfSession::pid_stats_fd() const { return bpf_map__fd(skel_->maps.pid_stats); }

Result<std::unique_ptr<RingReader>> RingReader::create(int map_fd, Callback cb) {
  std::unique_ptr<RingReader> r(new RingReader());
  r->cb_ = std::move(cb);
  r->rb_ = ring_buffer__new(map_fd, &RingReader::trampoline, r.get(), nullptr);
  if (!r->rb_) return bpf_error("creating the ring buffer reader", errno);
  return r;
}

RingReader::~RingReader() {
  if (rb_) ring_buffer__free(rb_);
}

int RingReader::trampoline(void* ctx, void* data, size_t size) {
  static_cast<RingReader*>(ctx)->cb_(data, size);
  return 0;
}

Result<int> RingReader::poll(int timeout_ms) {
  int n = ring_buffer__poll(rb_, timeout_ms);
  if (n == -EINTR) n = 0;
  if (n < 0) return bpf_error("polling the ring buffer", n);
  // The BPF side skips wake-ups for small amounts of data (they cost more than the call
  // being traced), so a timeout does not mean the buffer is empty: consume regardless.
  int m = ring_buffer__consume(rb_);
  if (m < 0) return bpf_error("draining the ring buffer", m);
  return n + m;
}

Result<int> RingReader::drain() {
  int n = ring_buffer__consume(rb_);
  if (n < 0) return bpf_error("draining the ring buffer", n);
  return n;
}

}  // namespace ingero::hal
