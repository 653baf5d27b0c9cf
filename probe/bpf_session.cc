#include "probe/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "ingero.skel.h"
#include "probe/bpf_errors.h"
#include "probe/inflight_table.h"
#include "probe/uprobe_multi.h"
#include "thread_state.h"

namespace ingero::hal {

int Link::fd() const { return link_ ? bpf_link__fd(link_) : fd_; }

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

RingSizes ring_sizes(int ncpus, uint32_t calls_mb) {
  auto pow2 = [](uint64_t v) {
    uint64_t p = 1;
    while (p < v) p <<= 1;
    return p;
  };
  uint64_t calls = calls_mb ? uint64_t(calls_mb) << 20
                            : std::clamp<uint64_t>(pow2(uint64_t(std::max(ncpus, 1))) << 20,
                                                   8u << 20, 64u << 20);
  uint64_t rest = std::clamp<uint64_t>(calls / 4, 2u << 20, 16u << 20);
  return {uint32_t(calls), uint32_t(rest), uint32_t(rest)};
}

const char* call_attach_name(CallAttach a) {
  switch (a) {
    case CallAttach::kSession:
      return "uprobe session";
    case CallAttach::kMultiPair:
      return "uprobe_multi pair";
    case CallAttach::kPerfPair:
      return "perf-event uprobe pair";
  }
  return "?";
}

Result<std::unique_ptr<BpfSession>> BpfSession::open(const BpfConfig& config) {
  libbpf_set_print(libbpf_print);
  // The best mode the kernel loads: a kernel that does not know an attach type rejects the
  // load, and the next one is tried. The environment may narrow the choice (tests, bench).
  std::vector<CallAttach> modes = {CallAttach::kSession, CallAttach::kMultiPair,
                                   CallAttach::kPerfPair};
  std::string want = getenv("INGERO_CALL_ATTACH") ? getenv("INGERO_CALL_ATTACH") : "";
  if (getenv("INGERO_NO_UPROBE_MULTI") || want == "perf")
    modes = {CallAttach::kPerfPair};
  else if (want == "multi")
    modes = {CallAttach::kMultiPair, CallAttach::kPerfPair};
  Status last;
  for (CallAttach m : modes) {
    std::unique_ptr<BpfSession> s(new BpfSession(config, m));
    last = s->load();
    if (last) return s;
  }
  return last.error();
}

Status BpfSession::load() {
  // INGERO_NO_MAP_ITER (tests) reads the calls in flight from the thread table from the start.
  bool iter = !getenv("INGERO_NO_MAP_ITER");
  Status st = load_object(iter);
  if (st || !iter || st.error().sys_errno != EPERM) {
    inflight_by_lookup_ = st && !iter;
    return st;
  }
  // Some kernels refuse a map-element iterator (a BPF LSM policy answered EPERM before the
  // verifier ran, and the whole object failed with it): the rest loads without it, and the
  // calls in flight are read from the thread table (probe/inflight_table.h).
  ingero_bpf__destroy(skel_);
  skel_ = nullptr;
  verification_.clear();
  // Refused again: what the second load says is about the programs that remain.
  if (Status again = load_object(false); !again) return again;
  inflight_by_lookup_ = true;
  return {};
}

Status BpfSession::load_object(bool inflight_iter) {
  const BpfConfig& config = config_;
  skel_ = ingero_bpf__open();
  if (!skel_) return bpf_error("opening the BPF object", errno);
  auto* sk = skel_;
  auto* ro = sk->rodata;
  ro->filter_pids_enabled = config.pids.empty() ? 0 : 1;
  ro->filter_cgroup_id = config.cgroup_id;
  ro->follow_children = config.follow_children ? 1 : 0;
  ro->host_context = config.host_context ? 1 : 0;
  ro->stacks_enabled = config.stacks ? 1 : 0;
  ro->stack_slow_ns = config.stack_slow_ns;
  ro->launch_timing_every = config.launch_timing_every;
  ro->name_repeat_ns = config.name_repeat_ns;
  batching_ = config.launch_batches && config.host_context && !config.selftest_only;
  ro->launch_batching = batching_ ? 1 : 0;
  bpf_program__set_autoload(sk->progs.ingero_ship_launches, batching_);
  ro->site_walks = config.stack_site_walks;
  ro->walk_interval_ns = config.stack_walk_interval_ns;

  bool session = attach_ == CallAttach::kSession;
  bpf_program__set_autoload(sk->progs.ingero_call, session);
  bpf_program__set_autoload(sk->progs.ingero_entry, !session);
  bpf_program__set_autoload(sk->progs.ingero_return, !session);
  if (session)
    bpf_program__set_expected_attach_type(sk->progs.ingero_call,
                                          bpf_attach_type(kBpfTraceUprobeSession));
  if (attach_ == CallAttach::kMultiPair)
    for (bpf_program* p : {sk->progs.ingero_entry, sk->progs.ingero_return})
      bpf_program__set_expected_attach_type(p, bpf_attach_type(kBpfTraceUprobeMulti));
  // `check`'s self-test attaches as the calls do: a uprobe_multi link where the kernel has
  // them. A perf-event uprobe may be refused where links are not (a host whose policy denies
  // perf_event_open to a CAP_BPF+CAP_PERFMON process), and check then said tracing could not
  // work where it did.
  // The loaders' link-map probe too: refused as a perf-event uprobe to a CAP_BPF+CAP_PERFMON
  // tracer (EACCES here), no dlopen of a traced command was seen, and nothing said so.
  if (attach_ != CallAttach::kPerfPair)
    for (bpf_program* p : {sk->progs.ingero_selftest, sk->progs.ingero_linkmap})
      bpf_program__set_expected_attach_type(p, bpf_attach_type(kBpfTraceUprobeMulti));
  if (!config.host_context) {
    for (bpf_program* p :
         {sk->progs.ingero_sched_switch, sk->progs.ingero_sched_waking, sk->progs.ingero_oom_victim,
          sk->progs.ingero_page_alloc, sk->progs.ingero_block_issue,
          sk->progs.ingero_block_complete, sk->progs.ingero_tcp_retransmit,
          sk->progs.ingero_host_fork, sk->progs.ingero_host_exec, sk->progs.ingero_host_exit})
      bpf_program__set_autoload(p, false);
  }
  bpf_program__set_autoload(sk->progs.ingero_cpu_sample, config.cpu_samples);
  bpf_program__set_autoload(sk->progs.ingero_inflight, inflight_iter);
  RingSizes rings = config.rings;
  RingSizes dflt = ring_sizes(libbpf_num_possible_cpus());
  bpf_map__set_max_entries(sk->maps.calls_rb, rings.calls ? rings.calls : dflt.calls);
  bpf_map__set_max_entries(sk->maps.aux_rb, rings.aux ? rings.aux : dflt.aux);
  bpf_map__set_max_entries(sk->maps.host_rb, rings.host ? rings.host : dflt.host);
  // Tests fill the pid filter with a few processes, not 16,384 (LongLivedLaunchers.*).
  if (const char* n = getenv("INGERO_TEST_PID_FILTER_ENTRIES"); n && std::atoi(n) > 0)
    bpf_map__set_max_entries(sk->maps.pid_filter, uint32_t(std::atoi(n)));

  if (config.selftest_only) {
    for (bpf_program* p = bpf_object__next_program(sk->obj, nullptr); p;
         p = bpf_object__next_program(sk->obj, p))
      bpf_program__set_autoload(p, p == sk->progs.ingero_selftest);
  }
  // The verifier's summary only (log level 4, BPF_LOG_STATS): a few lines a program.
  std::vector<std::pair<bpf_program*, std::unique_ptr<char[]>>> logs;
  constexpr size_t kStatsLog = 4096;
  if (config.verifier_stats)
    for (bpf_program* p = bpf_object__next_program(sk->obj, nullptr); p;
         p = bpf_object__next_program(sk->obj, p)) {
      if (!bpf_program__autoload(p)) continue;
      logs.emplace_back(p, std::make_unique<char[]>(kStatsLog));
      logs.back().second[0] = 0;
      bpf_program__set_log_buf(p, logs.back().second.get(), kStatsLog);
      bpf_program__set_log_level(p, 4);
    }
  LoadWarnings warnings;
  if (int err = ingero_bpf__load(sk)) return load_error(err, warnings.text());
  for (auto& [prog, log] : logs) {
    ProgramVerification v;
    v.name = bpf_program__name(prog);
    unsigned long long n = 0;
    if (const char* at = std::strstr(log.get(), "processed ");
        at && std::sscanf(at, "processed %llu insns", &n) == 1)
      v.insns = n;
    if (const char* at = std::strstr(log.get(), "verification time ");
        at && std::sscanf(at, "verification time %llu usec", &n) == 1)
      v.us = n;
    verification_.push_back(std::move(v));
  }
  for (uint32_t pid : config.pids) {
    if (auto st = add_pid(pid); !st) return st;
  }
  return {};
}

BpfSession::~BpfSession() {
  core_links_.clear();
  inflight_iter_ = Link();  // before the programs it runs go
  if (skel_) ingero_bpf__destroy(skel_);
}

std::vector<std::pair<std::string, Status>> BpfSession::attach_core() {
  std::vector<std::pair<std::string, Status>> out;
  struct {
    bpf_program* prog;
    const char* name;
  } all[] = {{skel_->progs.ingero_thread_exit, "sched_process_exit"},
             {skel_->progs.ingero_follow_fork, "sched_process_fork"},
             {skel_->progs.ingero_exec, "sched_process_exec"}};
  for (auto& a : all) {
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

// Links for `which` of `sites`: one session link, or an entry and a return uprobe_multi link,
// for all of them; or two perf-event uprobes each. `ends`: both of a pair, or one.
Result<std::vector<Link>> BpfSession::attach_sites(const std::string& path,
                                                   const std::vector<CallSite>& sites,
                                                   const std::vector<size_t>& which, Ends ends) {
  std::vector<Link> links;
  bool entry = ends != Ends::kReturn, ret = ends != Ends::kEntry;
  if (attach_ == CallAttach::kPerfPair) {
    for (size_t i : which) {
      for (bool is_ret : {false, true}) {
        if (!(is_ret ? ret : entry)) continue;
        LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = sites[i].probe_id, .retprobe = is_ret);
        bpf_link* l = bpf_program__attach_uprobe_opts(
            is_ret ? skel_->progs.ingero_return : skel_->progs.ingero_entry, -1, path.c_str(),
            sites[i].file_offset, &opts);
        if (!l)
          return bpf_error(std::string(is_ret ? "uretprobe" : "uprobe") + " on " + path, errno);
        links.push_back(Link::perf_uprobe(l));
      }
    }
    return links;
  }
  std::vector<uint64_t> offsets, cookies;
  for (size_t i : which) {
    offsets.push_back(sites[i].file_offset);
    cookies.push_back(sites[i].probe_id);
  }
  auto link = [&](bpf_program* prog, UprobeMode mode) -> Status {
    auto fd = link_uprobe_multi(bpf_program__fd(prog), path, offsets, cookies, mode);
    if (!fd) return fd.error();
    links.push_back(Link::from_fd(*fd));
    return {};
  };
  if (attach_ == CallAttach::kSession) {
    if (auto st = link(skel_->progs.ingero_call, UprobeMode::kSession); !st) return st.error();
    return links;
  }
  if (entry)
    if (auto st = link(skel_->progs.ingero_entry, UprobeMode::kEntry); !st) return st.error();
  if (ret)
    if (auto st = link(skel_->progs.ingero_return, UprobeMode::kReturn); !st) return st.error();
  return links;
}

Status BpfSession::update_recipes(const std::vector<uint32_t>& probe_ids,
                                  const std::function<void(ingero_recipe&)>& change,
                                  const char* what) {
  for (uint32_t id : probe_ids) {
    if (id >= INGERO_MAX_PROBES) continue;
    ingero_recipe r{};
    if (bpf_map__lookup_elem(skel_->maps.recipes, &id, sizeof(id), &r, sizeof(r), 0) != 0)
      return bpf_error("reading a probe recipe", errno);
    change(r);
    if (bpf_map__update_elem(skel_->maps.recipes, &id, sizeof(id), &r, sizeof(r), BPF_ANY) != 0)
      return bpf_error(what, errno);
  }
  return {};
}

Status BpfSession::retire_probes(const std::vector<uint32_t>& probe_ids, bool gone) {
  return update_recipes(
      probe_ids,
      [gone](ingero_recipe& r) { r.valid = gone ? INGERO_RECIPE_GONE : INGERO_RECIPE_RETIRING; },
      "retiring a probe recipe");
}

Status BpfSession::set_launch_window(const std::vector<uint32_t>& probe_ids, uint16_t window) {
  return update_recipes(
      probe_ids, [window](ingero_recipe& r) { r.window = window; },
      "setting a launch timing window");
}

AttachResult BpfSession::attach_calls(const std::string& path, const std::vector<CallSite>& sites,
                                      bool entries_only) {
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
  Ends ends = entries_only && attach_ != CallAttach::kSession ? Ends::kEntry : Ends::kBoth;
  if (attach_ != CallAttach::kPerfPair) {
    if (auto links = attach_sites(path, sites, ok, ends)) {
      for (auto& l : *links) out.links.push_back(std::move(l));
      return out;
    }
    // One bad offset fails the whole batch: isolate it by attaching the sites one by one.
  }
  for (size_t i : ok) {
    auto links = attach_sites(path, sites, {i}, ends);
    if (!links) {
      out.failed.push_back({i, links.error().message});
      continue;
    }
    for (auto& l : *links) out.links.push_back(std::move(l));
  }
  return out;
}

Result<std::vector<Link>> BpfSession::attach_returns(const std::string& path,
                                                     const std::vector<CallSite>& sites) {
  if (attach_ == CallAttach::kSession) return std::vector<Link>{};
  std::vector<size_t> all(sites.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return attach_sites(path, sites, all, Ends::kReturn);
}

Result<Link> BpfSession::attach_linkmap(const std::string& ldso_path, uint64_t file_offset,
                                        uint64_t cookie) {
  if (attach_ != CallAttach::kPerfPair) {
    const uint64_t offsets[] = {file_offset}, cookies[] = {cookie};
    auto fd = link_uprobe_multi(bpf_program__fd(skel_->progs.ingero_linkmap), ldso_path, offsets,
                                cookies, UprobeMode::kEntry);
    if (!fd) return bpf_error("uprobe on " + ldso_path + " _dl_debug_state", fd.error().sys_errno);
    return Link::from_fd(*fd);
  }
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = false);
  bpf_link* l = bpf_program__attach_uprobe_opts(skel_->progs.ingero_linkmap, -1, ldso_path.c_str(),
                                                file_offset, &opts);
  if (!l) return bpf_error("uprobe on " + ldso_path + " _dl_debug_state", errno);
  return Link::perf_uprobe(l);
}

Result<Link> BpfSession::attach_selftest(const std::string& path, uint64_t file_offset) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = false);
  // This process only: attached to every process of the file, a check running beside another
  // (two `ingero check`, an MCP server's get_check) counted the other's call too, and the
  // breakpoints of two self-tests coming and going on one address could kill the other with
  // SIGTRAP. For one process the kernel puts the breakpoint in no other.
  if (attach_ != CallAttach::kPerfPair) {
    const uint64_t offsets[] = {file_offset};
    auto fd = link_uprobe_multi(bpf_program__fd(skel_->progs.ingero_selftest), path, offsets, {},
                                UprobeMode::kEntry, uint32_t(getpid()));
    if (!fd) return bpf_error("self-test uprobe", fd.error().sys_errno);
    return Link::from_fd(*fd);
  }
  bpf_link* l = bpf_program__attach_uprobe_opts(skel_->progs.ingero_selftest, int(getpid()),
                                                path.c_str(), file_offset, &opts);
  if (!l) return bpf_error("self-test uprobe", errno);
  return Link::perf_uprobe(l);
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

std::vector<uint64_t> BpfSession::names_held_back(const std::vector<uint32_t>& probe_ids) const {
  std::vector<uint64_t> out(probe_ids.size(), 0);
  for (size_t i = 0; i < probe_ids.size(); ++i) {
    uint32_t k = probe_ids[i];
    if (k < INGERO_MAX_PROBES)
      (void)bpf_map__lookup_elem(skel_->maps.names_held, &k, sizeof(k), &out[i], sizeof(out[i]), 0);
  }
  return out;
}

Status BpfSession::read_inflight(std::vector<ingero_inflight_rec>& out) {
  if (inflight_by_lookup_)
    return read_inflight_from_table(bpf_map__fd(skel_->maps.threads),
                                    bpf_map__fd(skel_->maps.recipes),
                                    bpf_map__fd(skel_->maps.offcpu), out);
  if (!inflight_iter_) {
    union bpf_iter_link_info info;
    std::memset(&info, 0, sizeof(info));
    info.map.map_fd = uint32_t(bpf_map__fd(skel_->maps.threads));
    LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &info, .link_info_len = sizeof(info));
    bpf_link* l = bpf_program__attach_iter(skel_->progs.ingero_inflight, &opts);
    if (!l) return bpf_error("attaching the in-flight iterator", errno);
    inflight_iter_ = Link(l);
  }
  int fd = bpf_iter_create(inflight_iter_.fd());
  if (fd < 0) return bpf_error("reading the calls in flight", errno);
  std::vector<uint8_t> buf(64 * 1024);
  size_t used = 0;
  while (true) {
    if (buf.size() - used < 4096) buf.resize(buf.size() * 2);
    ssize_t n = ::read(fd, buf.data() + used, buf.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return bpf_error("reading the calls in flight", e);
    }
    if (n == 0) break;
    used += size_t(n);
  }
  ::close(fd);
  size_t k = used / sizeof(ingero_inflight_rec);
  size_t at = out.size();
  out.resize(at + k);
  if (k) std::memcpy(&out[at], buf.data(), k * sizeof(ingero_inflight_rec));
  return {};
}

std::optional<ThreadSched> BpfSession::thread_sched(uint32_t tid) const {
  ingero_offcpu_start st{};
  if (bpf_map__lookup_elem(skel_->maps.offcpu, &tid, sizeof(tid), &st, sizeof(st), 0) != 0)
    return std::nullopt;
  return ThreadSched{st.ts, st.prev_state};
}

uint64_t BpfSession::thread_py_tstate(uint32_t tid) const {
  std::vector<uint8_t> v(bpf_map__value_size(skel_->maps.threads));
  if (bpf_map__lookup_elem(skel_->maps.threads, &tid, sizeof(tid), v.data(), v.size(), 0) != 0)
    return 0;
  uint64_t ts = 0;
  std::memcpy(&ts, v.data() + offsetof(ingero_thread, py_tstate), sizeof(ts));
  return ts;
}

int BpfSession::calls_fd() const { return bpf_map__fd(skel_->maps.calls_rb); }
int BpfSession::aux_fd() const { return bpf_map__fd(skel_->maps.aux_rb); }
int BpfSession::host_fd() const { return bpf_map__fd(skel_->maps.host_rb); }
volatile uint32_t* BpfSession::reader_busy_flag() { return &skel_->bss->ingero_reader_busy; }

Status BpfSession::set_python(uint32_t tgid, const ingero_py_config* config) {
  int fd = bpf_map__fd(skel_->maps.py_procs);
  if (!config)
    bpf_map_delete_elem(fd, &tgid);
  else if (bpf_map_update_elem(fd, &tgid, config, BPF_ANY) != 0)
    return bpf_error("configuring Python frames for pid " + std::to_string(tgid), errno);
  // Threads look again: those that found no entry for their process, and those that keep a
  // copy of it (stacks.bpf.c: py_procs_gen, py_config_of).
  __atomic_fetch_add(&skel_->bss->py_procs_gen, 1, __ATOMIC_RELEASE);
  return {};
}
int BpfSession::pid_stats_fd() const { return bpf_map__fd(skel_->maps.pid_stats); }

}  // namespace ingero::hal
