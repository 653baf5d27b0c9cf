#include "app/tracer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "app/commands.h"
#include "app/fleet_hook.h"
#include "app/session_chains.h"
#include "app/trace_samplers.h"
#include "app/trace_session.h"
#include "app/trace_signals.h"
#include "app/trace_summary.h"
#include "app/traced_command.h"
#include "capture/event_pipeline.h"
#include "capture/host_info.h"
#include "capture/sink_set.h"
#include "capture/stack_collector.h"
#include "engine/chain.h"
#include "hal/memory.h"
#include "kernelside/cpu_sampler.h"
#include "kernelside/host_programs.h"
#include "probe/bpf_session.h"
#include "probe/probe_manager.h"
#include "probe/record_decoder.h"
#include "probe/ring_reader.h"
#include "serve/metrics/metrics.h"
#include "store/file_access.h"
#include "store/sql_trace_source.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace trace_detail {

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
hal::BpfConfig Trace::bpf_config() {
  hal::BpfConfig cfg;
  cfg.rings = hal::ring_sizes(int(sysconf(_SC_NPROCESSORS_CONF)), opts_.ringbuf_mb);
  cfg.pids = opts_.pids;
  cfg.stacks = opts_.stacks;
  cfg.stack_site_walks = opts_.stack_samples;
  cfg.launch_timing_every = opts_.launch_timing;
  // Test-only: INGERO_TEST_NAME_REPEAT_MS sets how long a name look-up's answer holds its repeats
  // off, so that a test can count them exactly whatever the machine's load.
  if (const char* ms = getenv("INGERO_TEST_NAME_REPEAT_MS"))
    cfg.name_repeat_ns = uint64_t(atoll(ms)) * 1'000'000;
  cfg.launch_batches = true;  // shipped below while tracing (loop) and at the end
  cfg.stack_walk_interval_ns = uint64_t(opts_.stack_interval_ms) * 1'000'000;
  cfg.cpu_samples = opts_.stacks && opts_.cpu_sample_hz > 0;
  if (cmd_.started() && !opts_.trace_all) cfg.pids.push_back(uint32_t(cmd_.pid()));
  return cfg;
}

// --prometheus: served before anything is attached, so that a taken port is a clear error, not
// a half-started tracer.
bool Trace::serve_metrics() {
  metrics_ = std::make_unique<serve::Metrics>(opts_.prometheus_per_process, &registry_);
  metrics_->set_kernel_series(opts_.prometheus_kernels);
  // Scrapes are served at the priority ingero started with, not the rings' reader's.
  if (auto st = metrics_->serve(opts_.prometheus, opts_.prometheus_web_config,
                                raised_priority_ ? std::optional<int>(base_nice_) : std::nullopt);
      !st) {
    std::cerr << "ingero trace: " << st.error().message << "\n";
    return false;
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
  return true;
}

// The probe table, the decoder, the sinks and the pipeline that reads the rings into them, and
// the stack collector.
void Trace::make_pipeline() {
  probes_ = std::make_unique<hal::ProbeManager>(session_.get(), backends_, local_);
  decoder_ = std::make_unique<hal::CallDecoder>(probes_->table());
  kernelside::TenantSources ts;
  if (!opts_.runtime_state.empty()) ts.runtime_roots = opts_.runtime_state;
  ts.names = opts_.tenant_names;
  tenants_ = std::make_unique<kernelside::TenantResolver>(ts);
  // First, so that a cgroup is named before another sink asks.
  tenant_watch_ = std::make_unique<kernelside::TenantWatch>(
      *tenants_, [this](const kernelside::CgroupTenant& t) {
        if (auto st = writer_->add_cgroup(cgroup_row(t)); !st && !opts_.quiet)
          std::cerr << cr() << "ingero: cgroup " << t.id << " not stored: " << st.error().message
                    << "\n";
      });
  sinks_.add(tenant_watch_.get());
  if (metrics_) {
    metrics_->set_tenants(tenants_.get());
    metrics_->set_process_labels([this](uint32_t pid) { return device_labels_.of(pid); });
  }
  sinks_.add(writer_.get());
  if (metrics_) sinks_.add(metrics_.get());
  sinks_.on_error = [this](const std::string& m) {
    std::cerr << cr() << "ingero: " << m
              << " (events are being lost; the trace keeps what was already committed)\n";
  };
  pipeline_ = std::make_unique<capture::EventPipeline>(*decoder_, sinks_);
  pipeline_->on_libwatch = [this](int pid, uint64_t mono_ns) { rescan_.emplace(pid, mono_ns); };
  // Launches are seen at entry (one trap): the driver launch of a runtime launch is folded into
  // it, and a runtime whose launches all reach the driver has its own launch probes detached.
  nesting_ = std::make_unique<capture::LaunchNesting>(local_, probes_->table());
  // Its other probes, in links of their own, are not touched; a launch in flight through the
  // ones detached is shipped untimed at its thread's next call (bpf/calls.bpf.c, ProbeManager).
  nesting_->detach = !opts_.keep_runtime_probes;
  nesting_->on_proven = [this](const std::string& lib) {
    // Said once the links are gone, from the thread that closed them (ProbeManager).
    auto n = probes_->detach_launches(lib, [this, lib](size_t probes) {
      if (opts_.quiet) return;
      std::ostringstream m;
      m << cr() << "ingero: every launch of " << lib << " reached the driver's launch ("
        << capture::LaunchNesting::kProofLaunches << " in a row): its " << probes
        << " launch probes are detached, and its launches are named from the driver's at one "
           "trap each (a launch it refused before the driver is not seen; "
           "--keep-runtime-probes keeps them)\n";
      std::cerr << m.str();
    });
    if (!n) {
      std::cerr << cr() << "ingero: " << n.error().message << "\n";
      return;
    }
    detached_.push_back(lib);
  };
  pipeline_->nesting = nesting_.get();
  // Without uprobe sessions, launches are timed in windows (probe/launch_windows.h).
  if (probes_->window_plan().period_ns)
    pipeline_->on_first_launch = [this](uint32_t probe) {
      probes_->launch_seen(probe, mono_now_ns());
    };
  // --max-db-size: commits of at most a 256th of the limit in records (1,024 or more), each
  // followed by a retention pass, so a drain of full rings (a slow disk, a stalled reader)
  // cannot write past the limit before the next tick's pass.
  if (opts_.max_db_bytes) {
    pipeline_->batch_records = size_t(std::max<uint64_t>(1024, opts_.max_db_bytes / 256));
    pipeline_->on_batch = [this] {
      pipeline_->commit();
      apply_retention(false);
    };
  }
  if (opts_.kernel_names) {
    kernels_ = std::make_unique<capture::KernelNamer>(
        sinks_, std::make_unique<capture::LocalProcessImage>());
    pipeline_->kernels = kernels_.get();
  } else {
    probes_->set_spec_filter(
        [](const hal::ProbeSpec& s) { return s.kind != hal::EventKind::kKernelName; });
  }
  if (opts_.stacks) {
    stacks_ = std::make_unique<capture::StackCollector>(sinks_, session_.get());
    stacks_->on_warning = [this](const std::string& m) {
      if (!opts_.quiet) std::cerr << cr() << "ingero: stacks: " << m << "\n";
    };
    pipeline_->stacks = stacks_.get();
    stacks_->scan_existing(scanned_pids());
    // A process that exited before its names were read: the maps its first stack was
    // resolved with.
    if (kernels_)
      kernels_->maps_fallback = [s = stacks_.get()](uint32_t pid) { return s->maps_of(pid); };
  }
  make_inflight();
}

// Calls in flight, read from the BPF thread table once a second (--inflight-after; 0: off).
void Trace::make_inflight() {
  if (opts_.inflight_after_s <= 0) return;
  capture::InflightMonitor::Options io;
  io.after_ns = uint64_t(opts_.inflight_after_s * 1e9);
  io.refresh_ns = std::clamp<uint64_t>(io.after_ns, 1'000'000'000, 60'000'000'000);
  inflight_host_ = std::make_unique<capture::ProcInflightHost>(*session_);
  inflight_ = std::make_unique<capture::InflightMonitor>(*decoder_, *inflight_host_, sinks_, io);
  inflight_->stacks = stacks_.get();
  inflight_->on_warning = [this](const std::string& m) {
    std::cerr << cr() << "ingero: calls in flight are not reported: " << m << "\n";
  };
  pipeline_->inflight = inflight_.get();
}

int Trace::open() {
  // Ahead of the traced threads: at full call rate on a busy host the reader must drain the
  // rings faster than the workload fills them, or calls are lost (bench/: 113,005 of 400,000
  // calls from 16 threads on 2 cores at equal priority, none at nice -10). Threads created
  // later inherit it; the command gets its own back.
  errno = 0;
  base_nice_ = getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && opts_.nice < base_nice_) {
    if (setpriority(PRIO_PROCESS, 0, opts_.nice) == 0)
      raised_priority_ = true;
    else if (!opts_.quiet)
      std::cerr << "ingero: could not raise the tracer's priority to nice " << opts_.nice << ": "
                << std::strerror(errno) << " (calls may be lost on a saturated host)\n";
  }
  tty_ = opts_.live && isatty(STDERR_FILENO);
  auto backends = registry_.select(opts_.backends);
  if (!backends) {
    std::cerr << "ingero trace: " << backends.error().message << "\n";
    return kExitUsage;
  }
  backends_ = *backends;
  if (opts_.db_path.empty()) {
    std::string note;
    db_ = default_db_path(&note);
    if (!note.empty() && !opts_.quiet) std::cerr << "ingero: " << note << "\n";
  } else {
    db_ = opts_.db_path;
  }
  if (!opts_.otlp.empty() && !(otlp_config_ = resolve_otlp(opts_))) return kExitUsage;
  if (!opts_.prometheus.empty() && !serve_metrics()) return kExitUsage;
  // OTLP exports the registry's series: it is kept whether or not /metrics is served.
  if (!metrics_ && otlp_config_)
    metrics_ = std::make_unique<serve::Metrics>(opts_.prometheus_per_process, &registry_);
  // What cannot be traced is refused before any probe or file (app/traced_command.h).
  if (int rc = refuse_untraceable(opts_.pids, opts_.command, std::cerr); rc != kExitOk) return rc;
  if (!opts_.command.empty() &&
      cmd_.start(opts_.command, raised_priority_ ? std::optional<int>(base_nice_) : std::nullopt) !=
          0) {
    std::cerr << "ingero trace: cannot start the command: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  if (cmd_.started()) note_command_pid(cmd_.pid());
  if (!hal::has_uprobe_pmu()) {
    if (auto t = hal::ensure_tracefs(); !t)
      std::cerr << "ingero: warning: " << t.error().message << "\n";
  }
  // The BPF programs load before the trace file is touched: a tracer refused here (no
  // privilege) leaves an existing file byte-identical and creates no folder or file.
  auto session = hal::BpfSession::open(bpf_config());
  if (!session) {
    std::cerr << "ingero trace: " << session.error().message << "\n";
    return kExitNoTracing;
  }
  session_ = std::move(*session);
  if (int rc = open_file(); rc != kExitOk) return rc;
  if (!opts_.clickhouse.empty() && !(shipper_ = make_shipper(db_, opts_.clickhouse, opts_.quiet)))
    return kExitFailure;

  make_pipeline();
  return kExitOk;
}

// The session's row: this host, the session's clock (capture::TraceClock: every time it
// stores is on it), the pid filter, flags and backends.
bool Trace::begin_session() {
  capture::HostInfo hi = capture::read_host_info();
  si_.node = opts_.node.empty() ? hi.hostname : opts_.node;
  si_.host = hi.hostname;
  si_.kernel = hi.kernel;
  si_.os_release = hi.os_release;
  si_.cpu_model = hi.cpu_model;
  si_.cpu_cores = hi.cpu_cores;
  si_.mem_total_mib = hi.mem_total_mib;
  clock_.mono_to_wall_ns = capture::mono_to_wall_offset_ns();
  pipeline_->clock = clock_;
  si_.started_at_ns = clock_.now();
  si_.mono_offset_ns = clock_.mono_to_wall_ns;
  for (auto p : session_->config().pids)
    si_.pid_filter += (si_.pid_filter.empty() ? "" : ",") + std::to_string(p);
  si_.flags = opts_.flags;
  si_.tracer_pid = uint32_t(getpid());  // chains that find the tracer among preemptors say so
  for (auto* b : backends_)
    si_.backends += (si_.backends.empty() ? "" : ",") + std::string(b->name());
  if (auto sid = writer_->begin_session(si_); !sid) {
    std::cerr << "ingero trace: " << sid.error().message << "\n";
    return false;
  }
  return true;
}

int Trace::attach() {
  auto fail = [&](const std::string& what) {
    std::cerr << "ingero trace: " << what << "\n";
    return kExitNoTracing;
  };
  for (auto& [tp, st] : session_->attach_core())
    if (!st) return fail(st.error().message);
  add_running_children();  // after the fork tracepoint: no child falls between the two
  host_ = std::make_unique<kernelside::HostPrograms>(*session_);
  for (auto& [tp, st] : host_->attach())
    if (!st) return fail(st.error().message);
  if (session_->config().cpu_samples) {
    sampler_ = std::make_unique<kernelside::CpuSampler>(*session_);
    if (auto st = sampler_->start(int(opts_.cpu_sample_hz)); !st) {
      // On-CPU samples refine gap attribution; tracing goes on without them.
      std::cerr << "ingero: warning: " << st.error().message << " (no on-CPU samples)\n";
      sampler_.reset();
    }
  }
  std::vector<int> pids = scanned_pids();
  auto libs = probes_->scan_all(&pids);
  if (!opts_.command.empty()) {
    // The program about to run may carry a static runtime: attach before releasing it.
    std::string exe = resolve_program(opts_.command[0]);
    if (!exe.empty()) {
      auto more = probes_->scan_file(exe, true);
      libs.insert(libs.end(), more.begin(), more.end());
    }
  }
  probes_->watch_loaders();
  print_attached(libs);

  if (!begin_session()) return kExitFailure;
  if (shipper_) shipper_->start();
  if (otlp_config_) {
    otlp_ = make_otlp_exporter(opts_, std::move(*otlp_config_),
                               {si_.host, si_.node, si_.started_at_ns, si_.mono_offset_ns},
                               metrics_->collectable());
    if (!otlp_) return kExitUsage;
    sinks_.add(otlp_.get());  // chains; with --otlp-spans, slow calls and collectives too
  }
  store_libraries(libs, true);
  pipeline_->commit();

  auto reader =
      hal::RingReader::create(session_->calls_fd(), session_->aux_fd(), session_->host_fd(),
                              [this](const void* d, size_t n) { pipeline_->on_record(d, n); });
  if (!reader) return fail(reader.error().message);
  reader_ = std::move(*reader);
  reader_->set_busy_flag(session_->reader_busy_flag());
  pipeline_->catch_up_stacks = [this] { (void)reader_->consume_aux(); };
  return kExitOk;
}

void Trace::loop() {
  start_mono_ = mono_now_ns();
  samplers_ = std::make_unique<HostSamplers>(
      sinks_, *pipeline_, session_->config().host_context ? session_->pid_stats_fd() : -1,
      opts_.sysfs_root, registry_.all());
  samplers_->start(start_mono_, clock_);
  start_devices();
  next_chains_ = start_mono_;
  const int64_t sec = 1'000'000'000;
  periodic_ = {
      // Before the commit below: at the end, the last device rows go in the last batch.
      {int64_t(opts_.flush_ms) * 1'000'000, true,
       [this](int64_t, bool final) { drain_devices(final); }},
      {int64_t(opts_.flush_ms) * 1'000'000, true, [this](int64_t, bool) { pipeline_->commit(); }},
      {sec, true, [this](int64_t m, bool f) { samplers_->sample(m, f); }},
      {5 * sec, true, [this](int64_t, bool) { update_counters(); }},
      {sec, true, [this](int64_t, bool) { check_db_file(); }},
      {sec, true, [this](int64_t m, bool f) { update_metrics(m, f); }},
      {sec, false, [this](int64_t, bool) { live_line(false); }},
      // With --max-db-size, at every commit: the size is held within what one commit writes.
      {opts_.max_db_bytes ? int64_t(opts_.flush_ms) * 1'000'000 : sec / 2, true,
       [this](int64_t, bool final) { apply_retention(final); }},
      {30 * sec, false, [this](int64_t, bool) { rescan_all(); }},
      // Launches a thread made before keeping its CPU wait in that CPU's batch: shipped once
      // they waited a poll's length (the end ships every batch: stop_recording).
      {sec / 10, false, [this](int64_t, bool) { (void)session_->ship_launch_batches(sec / 10); }},
      {sec / 10, false, [this](int64_t m, bool) { probes_->tick_launch_windows(m); }},
  };
  if (inflight_)
    periodic_.push_back({sec, false, [this](int64_t m, bool) { inflight_->tick(uint64_t(m)); }});
  // Not under the perf pair, whose closes take ~0.1 s a probe (a wake waits for them).
  if (kernels_ && !opts_.keep_lookup_probes && session_->uses_uprobe_multi()) {
    periodic_.push_back({sec, false, [this](int64_t, bool) { rest_lookups(); }});
    periodic_.push_back({sec / 10, false, [this](int64_t, bool) { wake_lookups(); }});
  }
  // --pid: once every traced process (the given ones and their children) has exited, nothing
  // is left to trace; the tracer ended only on a signal or --duration, tracing nothing.
  if (!opts_.pids.empty() && opts_.command.empty())
    periodic_.push_back({sec, false, [this](int64_t, bool) {
                           pids_gone_ = pids_gone_ || session_->no_pid_left();
                         }});
  for (auto& p : periodic_) p.next = start_mono_ + p.period_ns;

  if (g_stop_signal) {  // before the command was released: it never runs
    exit_reason_ = signal_name(g_stop_signal);
    cmd_.end_unreleased(g_stop_signal);
    std::cerr << "ingero: " << exit_reason_ << " before tracing began"  // even with -q
              << (cmd_.started() ? ": the command was not run" : "") << "\n";
    return;
  }
  cmd_.release();
  if (!opts_.quiet && opts_.command.empty())
    std::cerr << "ingero: tracing"
              << (opts_.duration_s > 0
                      ? " for " + engine::format_duration(uint64_t(opts_.duration_s * 1e9))
                      : "")
              << "; Ctrl-C to stop. Writing " << db_ << "\n";

  // Test-only: INGERO_TEST_READ_PAUSE_MS delays the first read of the rings, so a test can
  // overflow a small ring deterministically and check that every loss is reported.
  if (const char* pause = getenv("INGERO_TEST_READ_PAUSE_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(atoll(pause)));
  int64_t deadline = opts_.duration_s > 0 ? start_mono_ + int64_t(opts_.duration_s * 1e9) : 0;
  exit_reason_ = "signal";
  while (true) {
    if (g_stop_signal) {
      // A signal that came after the command had exited on its own did not end the session.
      exit_reason_ = cmd_.exited() && signal_came_after_child_exit() ? "command exited"
                                                                     : signal_name(g_stop_signal);
      break;
    }
    if (deadline && mono_now_ns() >= deadline) {
      exit_reason_ = "duration";
      break;
    }
    if (cmd_.exited()) {
      exit_reason_ = "command exited";
      break;
    }
    if (pids_gone_) {
      exit_reason_ = "processes exited";
      break;
    }
    auto n = reader_->poll(100);
    if (!n) {
      std::cerr << "\ningero trace: " << n.error().message << "\n";
      exit_reason_ = "ring buffer error";
      break;
    }
    pipeline_->end_cycle();
    rescan_pending();
    int64_t now = mono_now_ns();
    for (auto& p : periodic_)
      if (now >= p.next) {
        p.run(now, false);
        p.next = now + p.period_ns;
      }
  }
}

}  // namespace trace_detail

}  // namespace ingero::app
