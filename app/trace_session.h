// The trace command's session (app/tracer.h: run_trace), shared by its parts: tracer.cc (open,
// attach, the loop), trace_periodic.cc (what the loop does every tick: the live line, loss
// counters, retention, folding, metrics and live chains) and trace_finish.cc (the session's
// end). Internal to app/.
#pragma once

#include <csignal>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "app/device_poller.h"
#include "app/fleet_hook.h"
#include "app/otlp_hook.h"
#include "app/trace_samplers.h"
#include "app/trace_signals.h"
#include "app/traced_command.h"
#include "app/tracer.h"
#include "capture/event_pipeline.h"
#include "capture/host_info.h"
#include "capture/inflight_host.h"
#include "capture/inflight_monitor.h"
#include "capture/kernel_namer.h"
#include "capture/launch_nesting.h"
#include "capture/lookup_rest.h"
#include "capture/sink_set.h"
#include "capture/stack_collector.h"
#include "kernelside/cpu_sampler.h"
#include "kernelside/host_programs.h"
#include "kernelside/tenant_names.h"
#include "kernelside/tenant_watch.h"
#include "probe/bpf_session.h"
#include "probe/probe_manager.h"
#include "probe/record_decoder.h"
#include "probe/ring_reader.h"
#include "serve/metrics/metrics.h"
#include "serve/otlp/exporter.h"
#include "store/file_access.h"
#include "store/trace_writer.h"

namespace ingero::app::trace_detail {

using capture::mono_now_ns;
using capture::wall_now_ns;

std::string human_bytes(double b);

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
  int open();            // the trace file, the command (held), the BPF object, the pipeline
  int open_file();       // the trace file, locked, repaired, its writer set up (trace_open_file.cc)
  int attach();          // tracepoints, sampler, call probes, the session row; releases the command
  bool begin_session();  // the session row (on its clock: clock_); false when it failed
  void loop();   // reads the rings until a duration passes, a signal arrives or the command exits
  int finish();  // stops the command first, drains, records the session, reports
  // finish()'s steps (app/trace_finish.cc). Nothing is recorded after stop_recording (the
  // command stopped, the probes detached, the rings drained); returns the probes attached.
  uint64_t stop_recording();
  store::SessionEnd session_end(const hal::BpfStats& stats, uint64_t attached) const;
  // The loss counters committed, the session's chains stored (and sent by OTLP): their count.
  size_t store_analysis(store::SessionEnd& end);
  // The last shipping pass and the writer's finish, under --clickhouse-exit-timeout.
  ingero::Status finish_writing(const store::SessionEnd& end);
  void print_stopped(const hal::BpfStats& stats, size_t nchains) const;  // without -q
  // Losses, OTLP drops and write failures (even with -q); the process's exit code.
  int exit_status(const store::SessionEnd& end, const ingero::Status& fin);
  void finish_otlp(const std::vector<engine::Chain>& chains, store::SessionEnd& end);
  hal::BpfConfig bpf_config();
  bool serve_metrics();
  void make_pipeline();
  void print_libraries(const std::vector<hal::LibraryStatus>& libs);
  void print_attached(const std::vector<hal::LibraryStatus>& libs);
  // late_pid: found while that process had them mapped, late_ns after its loader said so (0:
  // unknown).
  void store_libraries(const std::vector<hal::LibraryStatus>& libs, bool with_errors,
                       uint32_t late_pid = 0, int64_t late_ns = 0);
  void rescan_pending();
  void rescan_all();  // the periodic safety net
  // The processes whose maps the scans read: with a pid filter, those it lets in now (no other
  // is traced; reading every process's maps cost ~0.1 ms each, at start and every 30 s); else
  // every process of the host.
  std::vector<int> scanned_pids() const;
  // With --pid: the given processes' children that already run (a launcher's workers) join the
  // filter, as those forked from now on do in BPF; said on stderr.
  void add_running_children();
  // At the end, once the command exited on its own: the processes it started that still run
  // (a `&` in a shell script), said on stderr; untraced from here on.
  void say_descendants_left() const;
  void live_line(bool final);
  void apply_retention(bool final);
  void fold_blocks();
  void update_metrics(int64_t mono, bool final);
  struct LiveAnalysis;
  void publish_live(const LiveAnalysis& la);  // a finished live analysis, to the sinks
  void start_live_analysis(int64_t mono);     // the next, off the event loop
  void update_counters();
  // The trace file removed or replaced under the tracer (its path no longer names the file it
  // writes): said once while tracing, and at the end as the failure it is.
  void check_db_file();
  // app/trace_lookups.cc: kernel-name look-ups that only repeat rest, and come back when a
  // kernel is launched without a name, or (`newcomer`) a process maps a library whose look-ups
  // rest (capture/lookup_rest.h).
  void rest_lookups();
  void wake_lookups(bool newcomer = false);
  void make_inflight();
  // The session row's kernel-naming counters (store/kernel_names.h), from the namer (none
  // when kernels are not named).
  std::optional<hal::KernelNaming> kernel_naming() const;
  void stop_child();
  // app/trace_device.cc: the device side channel (NVML, amdgpu): opened and started with the
  // loop, drained into the trace file and the registry every --flush-ms, stopped at the end.
  void start_devices();
  void drain_devices(bool final);
  std::string cr() const { return tty_ ? "\r\033[K" : ""; }

  const TraceOptions& opts_;
  const hal::BackendRegistry& registry_;
  std::vector<const hal::VendorBackend*> backends_;
  std::string db_;
  // Held while the file is written (store/file_access.h); declared before every member with a
  // connection to the file, so that it is released after all of them.
  store::TraceLock lock_;
  std::unique_ptr<hal::BpfSession> session_;
  std::unique_ptr<hal::ProbeManager> probes_;
  std::unique_ptr<kernelside::HostPrograms> host_;
  std::unique_ptr<kernelside::CpuSampler> sampler_;
  std::unique_ptr<store::TraceWriter> writer_;
  // Who each cgroup the events name belongs to (cgroup_metadata, the metrics' tenant labels).
  std::unique_ptr<kernelside::TenantResolver> tenants_;
  std::unique_ptr<kernelside::TenantWatch> tenant_watch_;
  std::unique_ptr<hal::CallDecoder> decoder_;
  hal::LocalHost local_;
  capture::SinkSet sinks_;
  std::unique_ptr<capture::EventPipeline> pipeline_;
  std::unique_ptr<capture::LaunchNesting> nesting_;
  std::vector<std::string> detached_;  // runtimes whose launch probes were detached
  std::unique_ptr<capture::StackCollector> stacks_;
  std::unique_ptr<capture::ProcInflightHost> inflight_host_;
  std::unique_ptr<capture::InflightMonitor> inflight_;  // calls in flight (--inflight-after)
  std::unique_ptr<capture::KernelNamer> kernels_;
  capture::LookupRest lookup_rest_;
  bool lookup_rest_off_ = false;  // a wake failed: the look-ups stay as they are
  std::unique_ptr<hal::RingReader> reader_;
  std::unique_ptr<serve::Metrics> metrics_;
  std::unique_ptr<fleet::Shipper> shipper_;
  std::optional<serve::otlp::ExporterConfig> otlp_config_;  // --otlp, resolved in open()
  std::unique_ptr<serve::otlp::Exporter> otlp_;             // started in attach()
  std::unique_ptr<HostSamplers> samplers_;
  std::unique_ptr<DevicePoller> devices_;
  ProcessLabeller device_labels_;
  uint64_t device_rows_lost_ = 0;  // samples the poller dropped or the writer refused
  bool device_warned_ = false;
  bool pids_gone_ = false;  // --pid: every traced process has exited
  std::vector<Periodic> periodic_;
  // The periodic analysis for the sinks (/metrics, OTLP): the active chains, and the steady
  // steps that ended.
  struct LiveAnalysis {
    std::vector<engine::Chain> chains;
    std::vector<std::pair<int64_t, hal::StepSample>> steps;  // (end_ns, sample)
    std::string error;  // the file could not be read whole: nothing of it is published
  };
  std::future<LiveAnalysis> live_chains_;
  int64_t steps_observed_to_ = 0;  // steps ending after this are new to the histograms
  bool retention_warned_ = false;
  bool fold_warned_ = false;
  bool live_warned_ = false;            // the live analysis failed, and that was said
  uint64_t folded_ = 0;                 // calls whose rows went with --full-rows
  int64_t fold_pause_max_ns_ = 0;       // the longest single folding pass
  int64_t retention_pause_max_ns_ = 0;  // the longest single retention pass while tracing
  int base_nice_ = 0;                   // the priority ingero started with (the command's)
  bool raised_priority_ = false;        // the tracer runs at opts_.nice
  int64_t next_chains_ = 0;
  uint64_t events_at_last_metrics_ = 0;
  int64_t last_metrics_ = 0;
  std::map<std::string, uint64_t> probe_counts_;  // attached probes by backend
  store::SessionInfo si_;
  capture::TraceClock clock_;       // the session's: every time compared with its events
  std::map<int, uint64_t> rescan_;  // pid -> its first notification since the last re-scan
  TracedCommand cmd_;               // with -- COMMAND
  int64_t start_mono_ = 0;
  bool tty_ = false;
  // The live line's last figures (trace_periodic.cc): seconds, calls, and when the next line
  // of its own is due where a command shares the terminal.
  double live_last_s_ = 0, live_next_s_ = 0;
  uint64_t live_last_calls_ = 0;
  std::string exit_reason_ = "signal";
  // Why the causal chains could not be stored: their commit carries the last events too, whose
  // loss is then said with this cause (the sinks never saw that write fail).
  std::string chains_error_;
  // The written file's identity (st_dev, st_ino), and whether its path stopped naming it.
  std::pair<uint64_t, uint64_t> db_id_{0, 0};
  bool db_gone_ = false;
};

}  // namespace ingero::app::trace_detail
