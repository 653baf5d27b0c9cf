#include "app/tracer.h"

#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <iostream>
#include <set>
#include <thread>

#include "app/commands.h"
#include "app/fleet_hook.h"
#include "app/session_chains.h"
#include "app/trace_samplers.h"
#include "app/trace_summary.h"
#include "app/traced_command.h"
#include "capture/event_pipeline.h"
#include "capture/host_info.h"
#include "capture/sink_set.h"
#include "capture/stack_collector.h"
#include "engine/chain.h"
#include "hal/bpf_session.h"
#include "hal/probe_manager.h"
#include "hal/record_decoder.h"
#include "hal/ring_reader.h"
#include "kernelside/cpu_sampler.h"
#include "kernelside/host_programs.h"
#include "serve/metrics/metrics.h"
#include "store/file_access.h"
#include "store/sql_trace_source.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace {

using capture::mono_now_ns;
using capture::wall_now_ns;

volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_signal_from_tty = 0;
// A terminal's Ctrl-C reaches the whole foreground process group, the traced command
// included (si_code SI_KERNEL); a `kill` reaches the tracer alone (SI_USER) and is forwarded.
void on_signal(int sig, siginfo_t* info, void*) {
  g_stop_signal = sig;
  g_signal_from_tty = info && info->si_code == SI_KERNEL;
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

// How long a command stopped by a forwarded signal gets to exit while the tracer keeps reading.
constexpr int kChildGraceSeconds = 5;

// Something the loop does every `period` (and once more at the end when `at_end`).
struct Periodic {
  int64_t period_ns;
  bool at_end;
  std::function<void(int64_t mono, bool final)> run;
  int64_t next = 0;
};

class Trace {
 public:
  Trace(const TraceOptions& o, const hal::BackendRegistry& r) : opts_(o), registry_(r) {}
  int run();

 private:
  int open();    // the trace file, the command (held), the BPF object, the pipeline
  int attach();  // tracepoints, sampler, call probes, the session row; releases the command
  void loop();   // reads the rings until a duration passes, a signal arrives or the command exits
  int finish();  // stops the command first, drains, records the session, reports
  hal::BpfConfig bpf_config();
  void print_libraries(const std::vector<hal::LibraryStatus>& libs);
  void store_libraries(const std::vector<hal::LibraryStatus>& libs, bool with_errors);
  void rescan_pending();
  void live_line(bool final);
  void apply_retention(bool final);
  void fold_calls();
  void update_metrics(int64_t mono, bool final);
  void update_counters();
  void stop_child();
  std::string cr() const { return tty_ ? "\r\033[K" : ""; }

  const TraceOptions& opts_;
  const hal::BackendRegistry& registry_;
  std::vector<const hal::VendorBackend*> backends_;
  std::string db_;
  std::unique_ptr<hal::BpfSession> session_;
  std::unique_ptr<hal::ProbeManager> probes_;
  std::unique_ptr<kernelside::HostPrograms> host_;
  std::unique_ptr<kernelside::CpuSampler> sampler_;
  std::unique_ptr<store::TraceWriter> writer_;
  std::unique_ptr<hal::CallDecoder> decoder_;
  hal::LocalHost local_;
  capture::SinkSet sinks_;
  std::unique_ptr<capture::EventPipeline> pipeline_;
  std::unique_ptr<capture::StackCollector> stacks_;
  std::unique_ptr<hal::RingReader> reader_;
  std::unique_ptr<serve::Metrics> metrics_;
  std::unique_ptr<fleet::Shipper> shipper_;
  std::unique_ptr<HostSamplers> samplers_;
  std::vector<Periodic> periodic_;
  // The periodic analysis for /metrics: chains by severity, and the steady steps that ended.
  struct LiveAnalysis {
    std::map<std::string, uint64_t> chains;
    std::vector<std::pair<int64_t, serve::Metrics::StepSample>> steps;  // (end_ns, sample)
  };
  std::future<LiveAnalysis> live_chains_;
  int64_t steps_observed_to_ = 0;
  bool retention_warned_ = false;
  bool fold_warned_ = false;
  uint64_t folded_ = 0;                 // launches folded into runs while tracing
  int64_t fold_pause_max_ns_ = 0;       // the longest single folding pass
  int64_t retention_pause_max_ns_ = 0;  // the longest single retention pass while tracing
  int base_nice_ = 0;                   // the priority ingero started with (the command's)
  bool raised_priority_ =
      false;  // the tracer runs at opts_.nice  // steps ending after this are new to the histograms
  int64_t next_chains_ = 0;
  uint64_t events_at_last_metrics_ = 0;
  int64_t last_metrics_ = 0;
  std::map<std::string, uint64_t> probe_counts_;  // attached probes by backend
  store::SessionInfo si_;
  std::set<int> rescan_;
  TracedCommand cmd_;  // with -- COMMAND
  int64_t start_mono_ = 0;
  bool tty_ = false;
  std::string exit_reason_ = "signal";
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

void Trace::store_libraries(const std::vector<hal::LibraryStatus>& libs, bool with_errors) {
  for (const auto& l : libs) {
    std::string missing, errors;
    if (with_errors) {
      for (auto& m : l.missing_required) missing += (missing.empty() ? "" : ",") + m;
      for (auto& e : l.errors) errors += (errors.empty() ? "" : "\n") + e;
    }
    (void)writer_->add_library({l.backend, l.vendor, l.api, l.path, l.soname, l.version, l.build_id,
                                l.embedded, l.specs_total, l.specs_resolved, l.probes_attached,
                                missing, errors});
  }
}

void Trace::rescan_pending() {
  if (rescan_.empty()) return;
  std::set<int> pids;
  pids.swap(rescan_);
  for (int pid : pids) {
    if (stacks_) stacks_->process_changed(uint32_t(pid));
    auto fresh = probes_->scan_pid(pid);
    if (fresh.empty()) continue;
    if (!opts_.quiet) std::cerr << cr() << "ingero: new libraries in pid " << pid << ":\n";
    print_libraries(fresh);
    store_libraries(fresh, false);
  }
  probes_->watch_loaders();
}

void Trace::live_line(bool final) {
  if (!tty_ || opts_.quiet) return;
  double secs = double(mono_now_ns() - start_mono_) / 1e9;
  auto c = session_counters(session_->stats(), pipeline_->counters().call_records, false);
  std::fprintf(stderr,
               "\r\033[Kingero: %.1fs  calls %llu (%.0f/s)  stored %llu  lost %llu  probes %zu%s",
               secs, (unsigned long long)pipeline_->counters().calls,
               secs > 0 ? double(pipeline_->counters().calls) / secs : 0.0,
               (unsigned long long)writer_->written(), (unsigned long long)c.calls_lost(),
               probes_->attached_probes(), final ? "\n" : "");
  std::fflush(stderr);
}

// The session row's loss counters, kept current so a live reader (explain, MCP, the dashboard)
// says what was lost so far.
void Trace::update_counters() {
  pipeline_->commit();
  (void)writer_->update_counters(
      session_counters(session_->stats(), pipeline_->counters().call_records, false));
}

// Agent metrics every second; the active causal chains (last 5 minutes) every 30 s, computed
// off the event loop on a read-only connection.
// --retain / --max-db-size: bounded passes every 2 s, between batches; more passes follow
// while rows past the policy remain, and at the end the policy is met before the file closes.
void Trace::apply_retention(bool final) {
  if (!opts_.keep_all) fold_calls();
  store::RetentionPolicy p{int64_t(opts_.retain_s * 1e9), opts_.max_db_bytes};
  if (!p.active()) return;
  // Passes of at most 5,000 rows per table while 40 ms of this tick remain (the writer's
  // pause stays under 50 ms; the rings absorb it); at the end, until the policy holds.
  int64_t t0 = mono_now_ns();
  while (final || mono_now_ns() - t0 < 40'000'000) {
    int64_t p0 = mono_now_ns();
    auto pass = writer_->apply_retention(p, wall_now_ns(), final ? 20000 : 5000);
    if (!final) retention_pause_max_ns_ = std::max(retention_pause_max_ns_, mono_now_ns() - p0);
    if (!pass) {
      if (!retention_warned_)
        std::cerr << "ingero: retention failed (the trace keeps growing): " << pass.error().message
                  << "\n";
      retention_warned_ = true;
      return;
    }
    if (!pass->more) return;
  }
}

// Tiered retention (store/tiers.h): launches older than --full-rows are folded into runs, in
// passes of at most 5,000 rows (~20 ms) while 100 ms of this 0.5 s tick remain: up to ~100,000
// rows a second, above the highest call rate a training loop makes (the rings absorb the
// pauses). The session's end leaves the last --full-rows of calls as they are.
void Trace::fold_calls() {
  int64_t t0 = mono_now_ns();
  int64_t now = wall_now_ns(), before = now - int64_t(opts_.full_rows_s * 1e9);
  while (mono_now_ns() - t0 < 100'000'000) {
    int64_t p0 = mono_now_ns();
    auto pass = writer_->fold_calls(before, now, 5000);
    fold_pause_max_ns_ = std::max(fold_pause_max_ns_, mono_now_ns() - p0);
    if (!pass) {
      if (!fold_warned_)
        std::cerr << "ingero: folding old calls failed (every call keeps its row): "
                  << pass.error().message << "\n";
      fold_warned_ = true;
      return;
    }
    folded_ += pass->folded;
    if (!pass->more) return;
  }
}

void Trace::update_metrics(int64_t mono, bool final) {
  if (!metrics_) return;
  const auto& pc = pipeline_->counters();
  uint64_t total = pc.calls + pc.host;
  double secs = last_metrics_ ? double(mono - last_metrics_) / 1e9 : 1.0;
  if (probes_) {  // after the detach at the end, the last counts stand
    probe_counts_.clear();
    for (const auto& l : probes_->libraries())
      if (!l.backend.empty()) probe_counts_[l.backend] += l.probes_attached;
  }
  struct stat sb {};
  uint64_t bytes = stat(db_.c_str(), &sb) == 0 ? uint64_t(sb.st_size) : 0;
  auto c = session_counters(session_->stats(), pc.call_records, false);
  metrics_->set_agent(total, secs > 0 ? double(total - events_at_last_metrics_) / secs : 0, c,
                      writer_->failed(), probe_counts_, bytes);
  events_at_last_metrics_ = total;
  last_metrics_ = mono;
  metrics_->retire_exited(mono);
  if (live_chains_.valid() &&
      live_chains_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    LiveAnalysis la = live_chains_.get();
    metrics_->set_chains(la.chains);
    std::vector<serve::Metrics::StepSample> fresh;
    int64_t last = steps_observed_to_;
    for (const auto& [end, sample] : la.steps)
      if (end > steps_observed_to_) {
        fresh.push_back(sample);
        last = std::max(last, end);
      }
    steps_observed_to_ = last;
    metrics_->observe_steps(fresh);
  }
  if (final || live_chains_.valid() || mono < next_chains_) return;
  pipeline_->commit();
  std::string db = db_;
  int64_t to = wall_now_ns(), from = to - 300'000'000'000LL;
  live_chains_ = std::async(std::launch::async, [db, from, to] {
    LiveAnalysis out;
    auto reader = store::TraceReader::open(db);
    if (!reader) return out;
    store::SqlTraceSource source(**reader);
    source.set_call_cache(0);  // the tracer's memory stays bounded (docs/performance.md)
    engine::Window w;
    w.from_ns = from;
    w.to_ns = to;
    auto a = engine::analyze(source, w, tracer_engine_options());
    for (const auto& c : a.chains) ++out.chains[engine::severity_name(c.severity)];
    for (const auto& s : a.steps.processes)
      for (const auto& st : s.steps)
        if (!st.warmup && st.duration())
          out.steps.push_back(
              {st.end_ns,
               {double(st.duration()) / 1e9, double(st.gpu_idle_ns) / double(st.duration())}});
    return out;
  });
  next_chains_ = mono + 30'000'000'000LL;
}

// Stopped by a signal while the command runs: it gets the signal too (unless the terminal
// already sent it to the whole group), and the tracer keeps reading until it has exited, so
// the calls it makes on its way out are stored. After a grace period it is left running.
void Trace::stop_child() {
  if (!cmd_.started() || cmd_.done() || !g_stop_signal) return;
  if (!g_signal_from_tty) cmd_.signal(g_stop_signal);
  int64_t until = mono_now_ns() + int64_t(kChildGraceSeconds) * 1'000'000'000;
  while (!cmd_.exited() && mono_now_ns() < until) {
    (void)reader_->poll(50);
    pipeline_->end_cycle();
  }
  if (!cmd_.done() && !opts_.quiet)
    std::cerr << cr() << "ingero: the traced command (pid " << cmd_.pid()
              << ") did not exit within " << kChildGraceSeconds
              << " s of the signal; it keeps running, untraced\n";
}

hal::BpfConfig Trace::bpf_config() {
  hal::BpfConfig cfg;
  cfg.rings = hal::ring_sizes(int(sysconf(_SC_NPROCESSORS_CONF)), opts_.ringbuf_mb);
  cfg.pids = opts_.pids;
  cfg.stacks = opts_.stacks;
  cfg.stack_site_walks = opts_.stack_samples;
  cfg.stack_walk_interval_ns = uint64_t(opts_.stack_interval_ms) * 1'000'000;
  cfg.cpu_samples = opts_.stacks && opts_.cpu_sample_hz > 0;
  if (cmd_.started() && !opts_.trace_all) cfg.pids.push_back(uint32_t(cmd_.pid()));
  return cfg;
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
  db_ = opts_.db_path.empty() ? default_db_path() : opts_.db_path;
  // A folder it creates (~/.ingero) is private (0700), as is the file (0600): a trace holds
  // every traced process's command line.
  if (auto st = store::make_private_dirs(std::filesystem::path(db_).parent_path().string()); !st) {
    std::cerr << "ingero trace: " << st.error().message << "\n";
    return kExitFailure;
  }
  if (!opts_.prometheus.empty()) {
    // Before anything is attached: a taken port is a clear error, not a half-started tracer.
    metrics_ = std::make_unique<serve::Metrics>(opts_.prometheus_per_process, &registry_);
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
  auto writer = store::TraceWriter::open(db_, registry_.views());
  if (!writer) {
    std::cerr << "ingero trace: cannot open trace file: " << writer.error().message << "\n";
    return kExitFailure;
  }
  writer_ = std::move(*writer);
  if (!opts_.clickhouse.empty() && !(shipper_ = make_shipper(db_, opts_.clickhouse, opts_.quiet)))
    return kExitFailure;
  if (!opts_.command.empty() &&
      cmd_.start(opts_.command, raised_priority_ ? std::optional<int>(base_nice_) : std::nullopt) !=
          0) {
    std::cerr << "ingero trace: cannot start the command: " << std::strerror(errno) << "\n";
    return kExitFailure;
  }
  if (!hal::has_uprobe_pmu()) {
    if (auto t = hal::ensure_tracefs(); !t)
      std::cerr << "ingero: warning: " << t.error().message << "\n";
  }
  auto session = hal::BpfSession::open(bpf_config());
  if (!session) {
    std::cerr << "ingero trace: " << session.error().message << "\n";
    return kExitNoTracing;
  }
  session_ = std::move(*session);

  probes_ = std::make_unique<hal::ProbeManager>(session_.get(), backends_, local_);
  decoder_ = std::make_unique<hal::CallDecoder>(probes_->table());
  sinks_.add(writer_.get());
  if (metrics_) sinks_.add(metrics_.get());
  sinks_.on_error = [this](const std::string& m) {
    std::cerr << cr() << "ingero: " << m
              << " (events are being lost; the trace keeps what was already committed)\n";
  };
  pipeline_ = std::make_unique<capture::EventPipeline>(*decoder_, sinks_);
  pipeline_->on_libwatch = [this](int pid) { rescan_.insert(pid); };
  if (opts_.stacks) {
    stacks_ = std::make_unique<capture::StackCollector>(sinks_, session_.get());
    stacks_->on_warning = [this](const std::string& m) {
      if (!opts_.quiet) std::cerr << cr() << "ingero: stacks: " << m << "\n";
    };
    pipeline_->stacks = stacks_.get();
    stacks_->scan_existing(local_.pids());
  }
  return kExitOk;
}

int Trace::attach() {
  auto fail = [&](const std::string& what) {
    std::cerr << "ingero trace: " << what << "\n";
    return kExitNoTracing;
  };
  for (auto& [tp, st] : session_->attach_core())
    if (!st) return fail(st.error().message);
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
              << hal::call_attach_name(session_->call_attach()) << ", "
              << probes_->loaders_watched() << " dynamic loader"
              << (probes_->loaders_watched() == 1 ? "" : "s") << " watched for new ones)\n";
    print_libraries(libs);
  }

  capture::HostInfo hi = capture::read_host_info();
  si_.node = opts_.node.empty() ? hi.hostname : opts_.node;
  si_.host = hi.hostname;
  si_.kernel = hi.kernel;
  si_.os_release = hi.os_release;
  si_.cpu_model = hi.cpu_model;
  si_.cpu_cores = hi.cpu_cores;
  si_.mem_total_mib = hi.mem_total_mib;
  si_.started_at_ns = wall_now_ns();
  si_.mono_offset_ns = capture::mono_to_wall_offset_ns();
  for (auto p : session_->config().pids)
    si_.pid_filter += (si_.pid_filter.empty() ? "" : ",") + std::to_string(p);
  si_.flags = opts_.flags;
  for (auto* b : backends_)
    si_.backends += (si_.backends.empty() ? "" : ",") + std::string(b->name());
  if (auto sid = writer_->begin_session(si_); !sid) {
    std::cerr << "ingero trace: " << sid.error().message << "\n";
    return kExitFailure;
  }
  if (shipper_) shipper_->start();
  store_libraries(libs, true);
  pipeline_->commit();

  auto reader =
      hal::RingReader::create(session_->calls_fd(), session_->aux_fd(), session_->host_fd(),
                              [this](const void* d, size_t n) { pipeline_->on_record(d, n); });
  if (!reader) return fail(reader.error().message);
  reader_ = std::move(*reader);
  pipeline_->catch_up_stacks = [this] { (void)reader_->consume_aux(); };
  return kExitOk;
}

void Trace::loop() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  start_mono_ = mono_now_ns();
  samplers_ = std::make_unique<HostSamplers>(
      *writer_, *pipeline_, metrics_.get(),
      session_->config().host_context ? session_->pid_stats_fd() : -1, opts_.sysfs_root,
      registry_.all());
  samplers_->start(start_mono_, wall_now_ns());
  next_chains_ = start_mono_;
  const int64_t sec = 1'000'000'000;
  periodic_ = {
      {int64_t(opts_.flush_ms) * 1'000'000, true, [this](int64_t, bool) { pipeline_->commit(); }},
      {sec, true, [this](int64_t m, bool f) { samplers_->sample(m, f); }},
      {5 * sec, true, [this](int64_t, bool) { update_counters(); }},
      {sec, true, [this](int64_t m, bool f) { update_metrics(m, f); }},
      {sec, false, [this](int64_t, bool) { live_line(false); }},
      {sec / 2, true, [this](int64_t, bool final) { apply_retention(final); }},
      {30 * sec, false,
       [this](int64_t, bool) {
         print_libraries(probes_->scan_all());
         probes_->watch_loaders();
       }},
  };
  for (auto& p : periodic_) p.next = start_mono_ + p.period_ns;

  cmd_.release();
  if (!opts_.quiet && opts_.command.empty())
    std::cerr << "ingero: tracing"
              << (opts_.duration_s > 0 ? " for " + std::to_string(int(opts_.duration_s)) + "s" : "")
              << "; Ctrl-C to stop. Writing " << db_ << "\n";

  // Test-only: INGERO_TEST_READ_PAUSE_MS delays the first read of the rings, so a test can
  // overflow a small ring deterministically and check that every loss is reported.
  if (const char* pause = getenv("INGERO_TEST_READ_PAUSE_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(atoll(pause)));
  int64_t deadline = opts_.duration_s > 0 ? start_mono_ + int64_t(opts_.duration_s * 1e9) : 0;
  exit_reason_ = "signal";
  while (true) {
    if (g_stop_signal) {
      exit_reason_ = g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
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

int Trace::finish() {
  stop_child();
  // No call can start after this: the probes go, then everything already recorded is read.
  // The probe table outlives the detach: records still in the rings name their probes by it.
  uint64_t attached = probes_->attached_probes();
  probes_->detach();
  (void)reader_->drain();
  pipeline_->end_cycle();
  int64_t mono = mono_now_ns();
  for (auto& p : periodic_)
    if (p.at_end) p.run(mono, true);
  if (live_chains_.valid()) live_chains_.wait();
  live_line(true);
  if (cmd_.started() && !cmd_.done() && !g_stop_signal && !opts_.quiet)
    std::cerr << "ingero: the traced command (pid " << cmd_.pid()
              << ") is still running, untraced\n";

  auto stats = session_->stats();
  const auto& pc = pipeline_->counters();
  store::SessionEnd end;
  end.stopped_at_ns = wall_now_ns();
  end.attached_probes = attached;
  end.counters = session_counters(stats, pc.call_records, true);
  end.bpf_stats_json = stats_json(stats, *pipeline_, stacks_.get());
  end.exit_reason = exit_reason_;
  // The rings are read out: unmapping them before the session's analysis makes the peak
  // memory the larger of tracing and analysing, not their sum.
  pipeline_->catch_up_stacks = nullptr;
  reader_.reset();
  size_t nchains = 0;
  if (auto c = store_session_chains(*writer_, db_, si_.node, si_.started_at_ns, end.stopped_at_ns))
    nchains = *c;
  else if (!opts_.quiet)
    std::cerr << "ingero: causal chains not stored: " << c.error().message << "\n";
  if (shipper_) shipper_->stop();  // finish() checkpoints: no reader may hold the file
  auto fin = writer_->finish(end);
  if (shipper_) finish_shipping(*shipper_, db_, opts_.quiet);

  int code = kExitOk;
  if (!opts_.quiet) {
    std::cerr << "ingero: stopped (" << exit_reason_ << "): " << pc.calls << " calls (" << pc.nested
              << " nested calls folded into them) and " << pc.host << " host events decoded, "
              << nchains << " causal chains, " << writer_->written() << " events stored in " << db_;
    struct stat st {};
    if (stat(db_.c_str(), &st) == 0) std::cerr << " (" << human_bytes(double(st.st_size)) << ")";
    std::cerr << "\n";
    if (stacks_) print_stacks_summary(std::cerr, stats, *stacks_);
    if (writer_->retention_deleted())
      std::cerr << "ingero: retention deleted " << writer_->retention_deleted()
                << " rows past the policy (--retain/--max-db-size); longest pass "
                << engine::format_duration(uint64_t(retention_pause_max_ns_)) << "\n";
    if (folded_)
      std::cerr << "ingero: folded " << folded_
                << " launches older than --full-rows into runs (per-second summaries keep every "
                   "call); longest pass "
                << engine::format_duration(uint64_t(fold_pause_max_ns_)) << "\n";
    if (pc.unknown_probe || pc.malformed)
      std::cerr << "ingero: " << pc.unknown_probe + pc.malformed
                << " records could not be decoded\n";
  }
  print_losses(std::cerr, end.counters);  // even with -q: the figures are lower bounds
  if (writer_->failed() || !fin) {
    std::cerr << "ingero: " << writer_->failed() << " events could not be written to " << db_
              << (sinks_.last_error().empty() ? "" : ": " + sinks_.last_error())
              << (fin ? "" : "; " + fin.error().message) << "\n";
    code = kExitFailure;
  }
  if (!opts_.quiet) cmd_.describe_end(std::cerr);
  // With a command, its status (128 + N when a signal ended it), as time(1) and strace(1) do;
  // the tracer's own failures are on stderr and in the session row. Without one, the tracer's.
  return cmd_.exit_code(code);
}

int Trace::run() {
  if (int rc = open(); rc != kExitOk) {
    cmd_.kill_and_reap();
    return rc;
  }
  if (int rc = attach(); rc != kExitOk) {
    cmd_.kill_and_reap();
    return rc;
  }
  loop();
  return finish();
}

}  // namespace

std::string default_db_path() {
  const char* home = getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.ingero/ingero.db";
}

int run_trace(const TraceOptions& opts, const hal::BackendRegistry& registry) {
  // A long-running agent: memory freed goes back to the system. By default glibc raises its
  // mmap threshold after each large free, so the next large blocks come from the heap and stay
  // there once freed; the session's analysis then peaked at 77 MiB instead of 63 over 3.2 M
  // calls (docs/performance.md).
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  Trace t(opts, registry);
  return t.run();
}

}  // namespace ingero::app
