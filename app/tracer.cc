#include "app/tracer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "app/commands.h"
#include "app/fleet_hook.h"
#include "app/session_chains.h"
#include "backends/rdma/rdma_backend.h"
#include "capture/event_pipeline.h"
#include "capture/host_info.h"
#include "capture/sink_set.h"
#include "capture/stack_collector.h"
#include "hal/bpf_session.h"
#include "hal/probe_manager.h"
#include "hal/record_decoder.h"
#include "hal/record_layout.h"
#include "hal/result.h"
#include "kernelside/host_decoder.h"
#include "kernelside/system_snapshot.h"
#include "serve/metrics/metrics.h"
#include "store/file_access.h"
#include "store/sql_trace_source.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace {

using capture::mono_now_ns;
using capture::wall_now_ns;

using ingero::Status;

volatile sig_atomic_t g_stop_signal = 0;
void on_signal(int sig) { g_stop_signal = sig; }

// What execvp would run: argv[0] as a path, or searched along $PATH.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = getenv("PATH");
  std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string cand = (end > start ? p.substr(start, end - start) : ".") + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

class Trace {
 public:
  Trace(const TraceOptions& o, const hal::BackendRegistry& r) : opts_(o), registry_(r) {}
  int run();

 private:
  void print_libraries(const std::vector<hal::LibraryStatus>& libs);
  void rescan_pending();
  void live_line(bool final);
  bool child_exited();
  int start_child();
  void sample_host(bool final);
  void sample_rdma();
  void update_metrics(bool final);

  const TraceOptions& opts_;
  const hal::BackendRegistry& registry_;
  std::unique_ptr<hal::BpfSession> session_;
  std::unique_ptr<hal::ProbeManager> probes_;
  std::unique_ptr<store::TraceWriter> writer_;
  std::unique_ptr<hal::CallDecoder> decoder_;
  hal::LocalHost host_;
  capture::SinkSet sinks_;
  std::unique_ptr<capture::EventPipeline> pipeline_;
  std::unique_ptr<capture::StackCollector> stacks_;
  std::unique_ptr<serve::Metrics> metrics_;
  std::unique_ptr<fleet::Shipper> shipper_;
  std::future<std::map<std::string, uint64_t>> live_chains_;
  int64_t next_metrics_ = 0, next_chains_ = 0;
  uint64_t events_at_last_metrics_ = 0;
  std::string db_path_;
  kernelside::SnapshotSampler sampler_;
  std::unique_ptr<kernelside::ProcessStatsReader> pstats_;
  int64_t pstats_wall_ = 0, pstats_mono_ = 0, next_pstats_ = 0, next_snapshot_ = 0;
  std::set<int> rescan_;
  pid_t child_ = -1;
  int child_status_ = 0;
  bool child_done_ = false;
  int go_pipe_ = -1;
  int64_t start_mono_ = 0;
  bool tty_ = false;
};

void Trace::print_libraries(const std::vector<hal::LibraryStatus>& libs) {
  if (opts_.quiet) return;
  for (const auto& l : libs) {
    if (l.backend.empty()) {
      std::cerr << "ingero:   skipped " << l.path << ": "
                << (l.errors.empty() ? "unreadable" : l.errors.front()) << "\n";
      continue;
    }
    std::cerr << "ingero:   " << l.probes_attached << " probes on " << l.path << " (" << l.backend
              << "/" << l.api << (l.version.empty() ? "" : " " + l.version)
              << (l.embedded ? ", static copy" : "") << ", " << l.specs_resolved << "/"
              << l.specs_total << " functions)\n";
    for (const auto& e : l.errors) std::cerr << "ingero:     attach failed: " << e << "\n";
  }
}

void Trace::rescan_pending() {
  if (rescan_.empty()) return;
  std::set<int> pids;
  pids.swap(rescan_);
  for (int pid : pids) {
    if (stacks_) stacks_->process_changed(uint32_t(pid));
    auto fresh = probes_->scan_pid(pid);
    if (!fresh.empty()) {
      if (!opts_.quiet)
        std::cerr << (tty_ ? "\r\033[K" : "") << "ingero: new libraries in pid " << pid << ":\n";
      print_libraries(fresh);
      for (const auto& l : fresh) {
        store::LibraryRow row{
            l.backend,         l.vendor,   l.api,      l.path,        l.soname,
            l.version,         l.build_id, l.embedded, l.specs_total, l.specs_resolved,
            l.probes_attached, "",         ""};
        (void)writer_->add_library(row);
      }
    }
  }
  probes_->watch_loaders();
}

void Trace::live_line(bool final) {
  if (!tty_ || opts_.quiet) return;
  double secs = double(mono_now_ns() - start_mono_) / 1e9;
  auto st = session_->stats();
  std::fprintf(stderr,
               "\r\033[Kingero: %.1fs  calls %llu (%.0f/s)  stored %llu  drops %llu  probes %zu%s",
               secs, (unsigned long long)pipeline_->counters().calls,
               secs > 0 ? double(pipeline_->counters().calls) / secs : 0.0,
               (unsigned long long)writer_->written(),
               (unsigned long long)(st[INGERO_STAT_RINGBUF_DROPS] + st[INGERO_STAT_HOST_DROPS]),
               probes_->attached_probes(), final ? "\n" : "");
  std::fflush(stderr);
}

// Once a second a system snapshot; every 5 s the kernel's per-process aggregates (and, for
// GPU processes, their page-allocation totals as events).
void Trace::sample_host(bool final) {
  int64_t mono = mono_now_ns();
  if (final || mono >= next_snapshot_) {
    auto s = sampler_.sample(wall_now_ns());
    pipeline_->commit();
    (void)writer_->add_snapshot({s.ts_ns, s.cpu_pct, s.mem_pct, s.load_avg, s.mem_avail_mb,
                                 s.swap_used_mb, s.procs_running});
    next_snapshot_ = mono + 1'000'000'000;
  }
  if (!final && mono < next_pstats_) return;
  sample_rdma();
  next_pstats_ = mono + 5'000'000'000LL;
  if (!pstats_) return;
  auto deltas = pstats_->read_deltas();
  int64_t wall = wall_now_ns();
  if (deltas && metrics_) metrics_->on_process_stats(*deltas);
  if (deltas) {
    for (const auto& d : *deltas) {
      store::ProcessStatsRow r{pstats_wall_,     wall - pstats_wall_, d.pid,         d.comm,
                               d.cgroup_id,      d.switches,          d.involuntary, d.off_cpu_ns,
                               d.max_off_cpu_ns, d.wakeups,           d.page_allocs, d.page_bytes,
                               d.forks,          d.block_ios,         d.block_bytes, d.block_ns};
      (void)writer_->add_process_stats(r);
      if (d.page_allocs && pipeline_->gpu_pids().count(d.pid))
        pipeline_->add(
            kernelside::page_alloc_event(d, uint64_t(pstats_mono_), uint64_t(mono - pstats_mono_)));
    }
  }
  pstats_wall_ = wall;
  pstats_mono_ = mono;
}

// InfiniBand / RoCE port counters, every 5 s with the process aggregates. A host without an
// HCA has no rows.
void Trace::sample_rdma() {
  int64_t ts = wall_now_ns();
  auto ports = backends::read_rdma_counters(opts_.sysfs_root);
  if (metrics_) metrics_->on_rdma(ports);
  for (const auto& s : ports) {
    auto emit = [&](const std::string& name, uint64_t v) {
      auto [factor, unit] = backends::rdma_counter_unit(name);
      store::RdmaCounterRow r{ts,
                              s.device,
                              s.transport,
                              s.state,
                              s.rate,
                              name,
                              std::string(unit),
                              s.port,
                              v,
                              v * factor,
                              backends::rdma_counter_is_error(name)};
      (void)writer_->add_rdma_counter(r);
    };
    for (const auto& [n, v] : s.counters) emit(n, v);
    for (const auto& [n, v] : s.hw_counters) emit("hw_counters/" + n, v);
  }
}

// Agent metrics every second; the active causal chains (last 5 minutes) every 30 s, computed
// off the event loop on a read-only connection.
void Trace::update_metrics(bool final) {
  if (!metrics_) return;
  int64_t mono = mono_now_ns();
  if (final || mono >= next_metrics_) {
    const auto& pc = pipeline_->counters();
    uint64_t total = pc.calls + pc.host;
    double secs = next_metrics_ ? double(mono - (next_metrics_ - 1'000'000'000)) / 1e9 : 1.0;
    std::map<std::string, uint64_t> probes;
    for (const auto& l : probes_->libraries())
      if (!l.backend.empty()) probes[l.backend] += l.probes_attached;
    auto st = session_->stats();
    struct stat sb {};
    uint64_t bytes = stat(db_path_.c_str(), &sb) == 0 ? uint64_t(sb.st_size) : 0;
    metrics_->set_agent(total, secs > 0 ? double(total - events_at_last_metrics_) / secs : 0,
                        st[INGERO_STAT_RINGBUF_DROPS] + st[INGERO_STAT_HOST_DROPS], probes, bytes);
    events_at_last_metrics_ = total;
    metrics_->retire_exited(int64_t(mono));
    next_metrics_ = mono + 1'000'000'000;
  }
  if (live_chains_.valid() &&
      live_chains_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    metrics_->set_chains(live_chains_.get());
  if (!live_chains_.valid() && mono >= next_chains_) {
    pipeline_->commit();
    std::string db = db_path_;
    int64_t to = wall_now_ns(), from = to - 300'000'000'000LL;
    live_chains_ = std::async(std::launch::async, [db, from, to] {
      std::map<std::string, uint64_t> counts;
      auto reader = store::TraceReader::open(db);
      if (!reader) return counts;
      store::SqlTraceSource source(**reader);
      engine::Window w;
      w.from_ns = from;
      w.to_ns = to;
      engine::EngineOptions eo;
      eo.breakdown = false;
      for (const auto& c : engine::analyze(source, w, eo).chains)
        ++counts[engine::severity_name(c.severity)];
      return counts;
    });
    next_chains_ = mono + 30'000'000'000LL;
  }
}

bool Trace::child_exited() {
  if (child_ <= 0 || child_done_) return child_done_;
  pid_t r = waitpid(child_, &child_status_, WNOHANG);
  if (r == child_) child_done_ = true;
  return child_done_;
}

int Trace::start_child() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fds[1]);
    char c;
    // Wait until the tracer has attached; EOF means it died: do not run untraced.
    if (read(fds[0], &c, 1) != 1) _exit(126);
    std::vector<char*> argv;
    for (const auto& a : opts_.command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "ingero: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[0]);
  go_pipe_ = fds[1];
  child_ = pid;
  return 0;
}

int Trace::run() {
  tty_ = opts_.live && isatty(STDERR_FILENO);
  auto backends = registry_.select(opts_.backends);
  if (!backends) {
    std::cerr << "ingero trace: " << backends.error().message << "\n";
    return kExitUsage;
  }
  std::string db = opts_.db_path.empty() ? default_db_path() : opts_.db_path;
  // A folder it creates (~/.ingero) is private (0700), as is the file (0600): a trace holds
  // every traced process's command line.
  if (auto st = store::make_private_dirs(std::filesystem::path(db).parent_path().string()); !st) {
    std::cerr << "ingero trace: " << st.error().message << "\n";
    return kExitFailure;
  }
  db_path_ = db;
  if (!opts_.prometheus.empty()) {
    // Before anything is attached: a taken port is a clear error, not a half-started tracer.
    metrics_ = std::make_unique<serve::Metrics>(opts_.prometheus_per_process);
    if (auto st = metrics_->serve(opts_.prometheus, opts_.prometheus_web_config); !st) {
      std::cerr << "ingero trace: " << st.error().message << "\n";
      return kExitUsage;
    }
    if (!opts_.quiet)
      std::cerr << "ingero: serving Prometheus metrics at " << metrics_->url() << "\n";
    if (!metrics_->loopback_only())
      std::cerr << "ingero trace: WARNING: Prometheus metrics at " << opts_.prometheus
                << " are reachable from other hosts"
                << (metrics_->authenticated()
                        ? ""
                        : " without authentication (see --prometheus-web-config)")
                << "\n";
  }
  auto writer = store::TraceWriter::open(db);
  if (!writer) {
    std::cerr << "ingero trace: cannot open trace file: " << writer.error().message << "\n";
    return kExitFailure;
  }
  writer_ = std::move(*writer);
  if (!opts_.clickhouse.empty() && !(shipper_ = make_shipper(db, opts_.clickhouse, opts_.quiet)))
    return kExitFailure;

  if (!opts_.command.empty() && start_child() != 0) {
    std::cerr << "ingero trace: cannot start the command: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  hal::BpfConfig cfg;
  cfg.ringbuf_bytes = opts_.ringbuf_mb << 20;
  cfg.pids = opts_.pids;
  cfg.stacks = opts_.stacks;
  cfg.stack_samples = opts_.stack_samples;
  if (child_ > 0 && !opts_.trace_all) cfg.pids.push_back(uint32_t(child_));
  if (!hal::has_uprobe_pmu()) {
    if (auto t = hal::ensure_tracefs(); !t)
      std::cerr << "ingero: warning: " << t.error().message << "\n";
  }
  auto session = hal::BpfSession::open(cfg);
  if (!session) {
    std::cerr << "ingero trace: " << session.error().message << "\n";
    if (child_ > 0) kill(child_, SIGKILL), waitpid(child_, nullptr, 0);
    return kExitNoTracing;
  }
  session_ = std::move(*session);
  if (auto st = session_->attach_core(); !st) {
    std::cerr << "ingero trace: " << st.error().message << "\n";
    if (child_ > 0) kill(child_, SIGKILL), waitpid(child_, nullptr, 0);
    return kExitNoTracing;
  }

  probes_ = std::make_unique<hal::ProbeManager>(session_.get(), *backends, host_);
  decoder_ = std::make_unique<hal::CallDecoder>(probes_->table());
  sinks_.add(writer_.get());
  if (metrics_) sinks_.add(metrics_.get());
  sinks_.on_error = [this](const std::string& m) {
    std::cerr << (tty_ ? "\r\033[K" : "") << "ingero: " << m
              << " (events are being lost; the trace keeps what was already committed)\n";
  };
  pipeline_ = std::make_unique<capture::EventPipeline>(*decoder_, sinks_);
  pipeline_->on_libwatch = [this](int pid) { rescan_.insert(pid); };
  if (opts_.stacks) {
    stacks_ = std::make_unique<capture::StackCollector>(sinks_, session_.get());
    stacks_->on_warning = [this](const std::string& m) {
      if (!opts_.quiet) std::cerr << (tty_ ? "\r\033[K" : "") << "ingero: stacks: " << m << "\n";
    };
    pipeline_->stacks = stacks_.get();
    stacks_->scan_existing(host_.pids());
  }
  auto libs = probes_->scan_all();
  if (!opts_.command.empty()) {
    // The program about to run may carry a static runtime: attach before releasing it.
    std::string exe = resolve_program(opts_.command[0]);
    if (!exe.empty()) {
      auto more = probes_->scan_file(exe, true);
      libs.insert(libs.end(), more.begin(), more.end());
    }
  }
  probes_->watch_loaders();
  std::set<std::string> files;
  for (const auto& l : libs)
    if (l.probes_attached) files.insert(l.path);
  if (!opts_.quiet) {
    std::cerr << "ingero: attached " << probes_->attached_probes() << " probes on " << files.size()
              << " librar" << (files.size() == 1 ? "y" : "ies") << " ("
              << probes_->loaders_watched() << " dynamic loader"
              << (probes_->loaders_watched() == 1 ? "" : "s") << " watched for new ones)\n";
    print_libraries(libs);
  }

  capture::HostInfo hi = capture::read_host_info();
  store::SessionInfo si;
  si.node = opts_.node.empty() ? hi.hostname : opts_.node;
  si.host = hi.hostname;
  si.kernel = hi.kernel;
  si.os_release = hi.os_release;
  si.cpu_model = hi.cpu_model;
  si.cpu_cores = hi.cpu_cores;
  si.mem_total_mib = hi.mem_total_mib;
  si.started_at_ns = wall_now_ns();
  si.mono_offset_ns = capture::mono_to_wall_offset_ns();
  for (auto p : cfg.pids) si.pid_filter += (si.pid_filter.empty() ? "" : ",") + std::to_string(p);
  si.flags = opts_.flags;
  for (auto* b : *backends)
    si.backends += (si.backends.empty() ? "" : ",") + std::string(b->name());
  if (auto sid = writer_->begin_session(si); !sid) {
    std::cerr << "ingero trace: " << sid.error().message << "\n";
    return kExitFailure;
  }
  if (shipper_) shipper_->start();
  for (const auto& l : libs) {
    std::string missing;
    for (auto& m : l.missing_required) missing += (missing.empty() ? "" : ",") + m;
    std::string errors;
    for (auto& e : l.errors) errors += (errors.empty() ? "" : "\n") + e;
    (void)writer_->add_library({l.backend, l.vendor, l.api, l.path, l.soname, l.version, l.build_id,
                                l.embedded, l.specs_total, l.specs_resolved, l.probes_attached,
                                missing, errors});
  }
  pipeline_->commit();

  auto reader = hal::RingReader::create(
      session_->events_fd(), [this](const void* d, size_t n) { pipeline_->on_record(d, n); });
  if (!reader) {
    std::cerr << "ingero trace: " << reader.error().message << "\n";
    return kExitNoTracing;
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  start_mono_ = mono_now_ns();
  if (cfg.host_context) {
    pstats_ = std::make_unique<kernelside::ProcessStatsReader>(session_->pid_stats_fd());
    (void)pstats_->read_deltas();  // baseline: activity before the trace is not ours
  }
  sampler_.sample(wall_now_ns());  // primes the CPU counters
  sample_rdma();
  pstats_wall_ = wall_now_ns();
  pstats_mono_ = start_mono_;
  next_snapshot_ = start_mono_ + 1'000'000'000;
  next_pstats_ = start_mono_ + 5'000'000'000LL;
  if (go_pipe_ >= 0) {
    if (write(go_pipe_, "g", 1) != 1) std::cerr << "ingero: cannot release the command\n";
    close(go_pipe_);
    go_pipe_ = -1;
  }
  if (!opts_.quiet && opts_.command.empty())
    std::cerr << "ingero: tracing"
              << (opts_.duration_s > 0 ? " for " + std::to_string(int(opts_.duration_s)) + "s" : "")
              << "; Ctrl-C to stop. Writing " << db << "\n";

  int64_t deadline = opts_.duration_s > 0 ? start_mono_ + int64_t(opts_.duration_s * 1e9) : 0;
  int64_t next_flush = start_mono_ + int64_t(opts_.flush_ms) * 1000000;
  int64_t next_live = start_mono_ + 1000000000;
  int64_t next_full_scan = start_mono_ + 30 * 1000000000LL;
  std::string exit_reason = "signal";
  while (true) {
    if (g_stop_signal) {
      exit_reason = g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
      break;
    }
    int64_t now = mono_now_ns();
    if (deadline && now >= deadline) {
      exit_reason = "duration";
      break;
    }
    if (child_exited()) {
      exit_reason = "command exited";
      break;
    }
    auto n = (*reader)->poll(100);
    if (!n) {
      std::cerr << "\ningero trace: " << n.error().message << "\n";
      exit_reason = "ring buffer error";
      break;
    }
    rescan_pending();
    now = mono_now_ns();
    if (now >= next_flush) {
      pipeline_->commit();
      next_flush = now + int64_t(opts_.flush_ms) * 1000000;
    }
    sample_host(false);
    update_metrics(false);
    if (now >= next_live) {
      live_line(false);
      next_live = now + 1000000000;
    }
    if (now >= next_full_scan) {
      print_libraries(probes_->scan_all());
      probes_->watch_loaders();
      next_full_scan = now + 30 * 1000000000LL;
    }
  }
  // Drain: records already queued belong to the trace. A second signal is not needed and
  // would not interrupt this; the drain is bounded by what is in the buffer now.
  (void)(*reader)->drain();
  sample_host(true);
  pipeline_->commit();
  update_metrics(true);
  if (live_chains_.valid()) live_chains_.wait();
  live_line(true);
  if (child_ > 0 && !child_done_ && exit_reason != "command exited") {
    if (g_stop_signal) {
      // As Ctrl-C in a terminal would: the command gets the same signal.
      kill(child_, g_stop_signal);
    } else if (!opts_.quiet) {
      std::cerr << "ingero: the traced command (pid " << child_ << ") is still running, untraced\n";
    }
  }

  auto stats = session_->stats();
  nlohmann::json sj;
  const char* names[] = {"calls",           "ringbuf_drops",    "thread_map_full", "depth_overflow",
                         "unpaired_return", "frames_discarded", "unfinished",      "host_drops",
                         "host_records",    "selftest",         "stacks_shipped",  "stacks_sampled",
                         "stack_drops",     "py_walks",         "py_faults"};
  static_assert(std::size(names) == INGERO_STAT_MAX, "name every BPF counter");
  for (int i = 0; i < INGERO_STAT_MAX; ++i) sj[names[i]] = stats.v[i];
  const auto& pc = pipeline_->counters();
  sj["unknown_probe_records"] = pc.unknown_probe;
  sj["malformed_records"] = pc.malformed;
  sj["libwatch_records"] = pc.libwatch;
  sj["delivery_lag_p50_us"] = pipeline_->delivery_lag_quantile_ns(0.50) / 1000;
  sj["delivery_lag_p99_us"] = pipeline_->delivery_lag_quantile_ns(0.99) / 1000;
  if (stacks_) {
    const auto& sc = stacks_->counters();
    sj["stacks_distinct"] = sc.stored;
    sj["stack_unknown_refs"] = sc.unknown_refs;
    sj["stack_native_frames"] = sc.native_frames;
    sj["stack_unresolved_frames"] = sc.unresolved;
    sj["stack_python_frames"] = sc.python_frames;
    sj["stack_python_invalid"] = sc.python_invalid;
    sj["stack_python_gone"] = sc.python_gone;
    sj["stack_python_missing"] = sc.python_missing;
    sj["stack_python_processes"] = sc.python_processes;
    sj["stack_python_refused"] = sc.python_refused;
  }
  store::SessionEnd end;
  end.stopped_at_ns = wall_now_ns();
  end.attached_probes = probes_->attached_probes();
  end.ringbuf_drops = stats[INGERO_STAT_RINGBUF_DROPS] + stats[INGERO_STAT_HOST_DROPS] +
                      stats[INGERO_STAT_STACK_DROPS];
  end.lost_calls = stats[INGERO_STAT_THREAD_MAP_FULL] + stats[INGERO_STAT_DEPTH_OVERFLOW];
  end.unfinished_calls = stats[INGERO_STAT_UNFINISHED];
  end.bpf_stats_json = sj.dump();
  end.exit_reason = exit_reason;
  size_t nchains = 0;
  if (auto c = store_session_chains(*writer_, db, si.node, si.started_at_ns, end.stopped_at_ns); c)
    nchains = *c;
  else if (!opts_.quiet)
    std::cerr << "ingero: causal chains not stored: " << c.error().message << "\n";
  if (shipper_) shipper_->stop();  // finish() checkpoints: no reader may hold the file
  auto fin = writer_->finish(end);
  if (shipper_) finish_shipping(*shipper_, db, opts_.quiet);

  int code = kExitOk;
  if (!opts_.quiet) {
    std::cerr << "ingero: stopped (" << exit_reason << "): " << pc.calls << " calls and " << pc.host
              << " host events decoded, " << nchains << " causal chains, " << writer_->written()
              << " events stored in " << db;
    struct stat st {};
    if (stat(db.c_str(), &st) == 0) std::cerr << " (" << human_bytes(double(st.st_size)) << ")";
    std::cerr << "\n";
    if (end.ringbuf_drops)
      std::cerr << "ingero: " << end.ringbuf_drops
                << " records were dropped because the ring buffer was full (raise --ringbuf-mb)\n";
    if (end.lost_calls)
      std::cerr << "ingero: " << end.lost_calls
                << " calls were not traced (thread table full or nesting deeper than "
                << INGERO_MAX_DEPTH << ")\n";
    if (end.unfinished_calls)
      std::cerr << "ingero: " << end.unfinished_calls
                << " calls were still running when their thread exited (stored as unfinished)\n";
    if (stacks_) {
      const auto& sc = stacks_->counters();
      std::cerr << "ingero: stacks: " << sc.stored << " distinct from " << sc.received
                << " records (" << stats[INGERO_STAT_STACKS_SAMPLED]
                << " calls referenced a stack already shipped)";
      if (sc.python_frames) std::cerr << ", " << sc.python_frames << " Python frames";
      if (sc.native_frames)
        std::cerr << ", " << sc.unresolved << " of " << sc.native_frames
                  << " native frames unresolved";
      if (sc.python_refused)
        std::cerr << ", " << sc.python_refused
                  << " Python processes with native frames only (interpreter not verified)";
      if (sc.python_invalid)
        std::cerr << ", " << sc.python_invalid << " Python frames dropped (unverified)";
      if (sc.python_gone)
        std::cerr << ", " << sc.python_gone
                  << " Python frames lost (the process exited before they were read)";
      if (sc.unknown_refs) std::cerr << ", " << sc.unknown_refs << " calls lost their stack record";
      std::cerr << "\n";
    }
    if (pc.unknown_probe || pc.malformed)
      std::cerr << "ingero: " << pc.unknown_probe + pc.malformed
                << " records could not be decoded\n";
  }
  if (writer_->failed() || !fin) {
    std::cerr << "ingero: " << writer_->failed() << " events could not be written to " << db
              << (sinks_.last_error().empty() ? "" : ": " + sinks_.last_error())
              << (fin ? "" : "; " + fin.error().message) << "\n";
    code = kExitFailure;
  }
  if (child_ > 0 && child_done_ && !opts_.quiet) {
    if (WIFEXITED(child_status_))
      std::cerr << "ingero: command exited with status " << WEXITSTATUS(child_status_) << "\n";
    else if (WIFSIGNALED(child_status_))
      std::cerr << "ingero: command killed by signal " << WTERMSIG(child_status_) << "\n";
  }
  return code;
}

}  // namespace

std::string default_db_path() {
  const char* home = getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.ingero/ingero.db";
}

int run_trace(const TraceOptions& opts, const hal::BackendRegistry& registry) {
  Trace t(opts, registry);
  return t.run();
}

}  // namespace ingero::app
