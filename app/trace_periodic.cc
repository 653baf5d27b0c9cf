// What the trace loop does every tick (app/trace_session.h): the live status line, the session
// row's loss counters, retention and folding passes, agent metrics and the live chains. Each
// kind goes to the sinks once, through the SinkSet (hal/event_sink.h).

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/session_chains.h"
#include "app/terminal_text.h"
#include "app/trace_session.h"
#include "app/trace_summary.h"
#include "engine/chain.h"
#include "store/sql_trace_source.h"
#include "store/trace_cache.h"

namespace ingero::app::trace_detail {

void Trace::live_line(bool final) {
  if (!tty_ || opts_.quiet) return;
  const double secs = double(mono_now_ns() - start_mono_) / 1e9;
  const uint64_t calls = pipeline_->counters().calls;
  // A command shares the terminal: its output would land after a line redrawn in place ("...
  // probes 177epoch 2: loss=0.2"). With one, the line is a line of its own, every 10 s.
  const bool own_lines = !opts_.command.empty();
  if (own_lines && !final && secs < live_next_s_) return;
  // The rate since the line before: the rate since the start hid a stalled job (a burst, then
  // 8 s idle, still read 7,003/s).
  const double span = secs - live_last_s_;
  const double rate = span > 0 ? double(calls - live_last_calls_) / span : 0.0;
  live_last_s_ = secs;
  live_last_calls_ = calls;
  live_next_s_ = secs + 10;
  auto c = session_counters(session_->stats(), pipeline_->counters().call_records, false);
  char line[256];
  std::snprintf(line, sizeof line,
                "ingero: %.1fs  calls %llu (%.0f/s)  stored %llu  lost %llu  probes %zu", secs,
                (unsigned long long)calls, rate, (unsigned long long)writer_->written(),
                (unsigned long long)c.calls_lost(), probes_->attached_probes());
  std::string text = line;
  if (own_lines) {
    std::fprintf(stderr, "%s\n", text.c_str());
  } else {
    // One row of the terminal: a line that wraps leaves a row behind at each redraw.
    winsize ws{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && text.size() >= ws.ws_col)
      text.resize(ws.ws_col - 1);
    std::fprintf(stderr, "\r\033[K%s%s", text.c_str(), final ? "\n" : "");
  }
  std::fflush(stderr);
}

// The session row's loss counters, kept current so a live reader (explain, MCP, the dashboard)
// says what was lost so far.
void Trace::update_counters() {
  pipeline_->commit();
  auto naming = kernel_naming();
  (void)sinks_.on_session_counters(
      session_counters(session_->stats(), pipeline_->counters().call_records, false),
      naming ? &*naming : nullptr);
}

// A trace file removed (or a new file renamed over its path) while the tracer writes it: the
// tracer wrote on into a file no path names, said "N events stored in FILE" and exited 0, and
// the trace was gone.
void Trace::check_db_file() {
  if (db_gone_ || db_id_.second == 0) return;
  struct stat st {};
  const bool gone = ::stat(db_.c_str(), &st) != 0
                        ? errno == ENOENT
                        : std::pair<uint64_t, uint64_t>(st.st_dev, st.st_ino) != db_id_;
  if (!gone) return;
  db_gone_ = true;
  TerminalText(std::cerr) << cr() << "ingero: " << db_
                          << " was removed or replaced while tracing: what is written from now "
                             "on goes into a file no path names, and is lost when the tracer "
                             "exits; stop it, and trace into a new file\n";
}

std::optional<hal::KernelNaming> Trace::kernel_naming() const {
  if (!kernels_) return std::nullopt;
  const auto& k = kernels_->counters();
  return hal::KernelNaming{k.names, k.unnamed_launches, k.unnamed_functions, k.unreadable,
                           0,       k.unnamed_at_rest};
}

// --retain / --max-db-size: bounded passes every 2 s, between batches; more passes follow
// while rows past the policy remain, and at the end the policy is met before the file closes.
void Trace::apply_retention(bool final) {
  if (!opts_.keep_all) fold_blocks();
  store::RetentionPolicy p{int64_t(opts_.retain_s * 1e9), opts_.max_db_bytes, {}};
  if (!p.active()) return;
  if (shipper_) p.shipped_through = shipper_->shipped_through_all();
  // Passes of at most 5,000 rows per table while 40 ms of this tick remain (the writer's
  // pause stays under 50 ms; the rings absorb it); at the end, until the policy holds.
  int64_t t0 = mono_now_ns();
  while (final || mono_now_ns() - t0 < 40'000'000) {
    int64_t p0 = mono_now_ns();
    auto pass = writer_->apply_retention(p, clock_.now(), final ? 20000 : 5000);
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

// Tiered retention (store/tiers.h): blocks of calls are folded as they fill (the writer); here
// the blocks whose calls all ended more than --full-rows ago lose their rows (their `full`
// form), one UPDATE of their entries. With --clickhouse, calls not yet in ClickHouse keep their
// rows: it receives rows, not runs.
void Trace::fold_blocks() {
  int64_t through = shipper_ ? shipper_->events_shipped_through() : INT64_MAX;
  int64_t p0 = mono_now_ns();
  // Seconds 2 s behind the clock are complete even when no call came since: summarised (and
  // then shippable and foldable) though the trace is idle.
  int64_t now = clock_.now();
  (void)writer_->summarise_before(now - store::kSummaryLagNs);
  auto pass = writer_->fold_blocks(now - int64_t(opts_.full_rows_s * 1e9), through);
  fold_pause_max_ns_ = std::max(fold_pause_max_ns_, mono_now_ns() - p0);
  if (!pass) {
    if (!fold_warned_)
      std::cerr << "ingero: folding old calls failed (they keep their rows): "
                << pass.error().message << "\n";
    fold_warned_ = true;
    return;
  }
  folded_ += *pass;
}

// Agent metrics every second; the active causal chains (last 5 minutes) every 30 s, computed
// off the event loop on a read-only connection, for the gauge and, with --otlp, as log records.
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
  // The file and its WAL: the file alone read 16 KiB while 1.2 MB waited in the WAL.
  uint64_t bytes = store::file_stamp(db_).bytes();
  hal::AgentStats a;
  a.events_total = total;
  a.events_per_s = secs > 0 ? double(total - events_at_last_metrics_) / secs : 0;
  a.lost = session_counters(session_->stats(), pc.call_records, false);
  a.store_errors = writer_->failed();
  a.probes_by_backend = probe_counts_;
  a.db_bytes = bytes;
  if (shipper_) {
    const fleet::ShipTotals t = shipper_->totals();
    const int64_t written = writer_->next_id() - 1;
    a.shipping = hal::AgentStats::Shipping{
        t.rows, t.failures, !t.last_error.empty(),
        uint64_t(std::max<int64_t>(0, written - shipper_->events_shipped_through()))};
  }
  (void)sinks_.on_agent_stats(a);
  events_at_last_metrics_ = total;
  last_metrics_ = mono;
  (void)sinks_.on_tick(mono);
  if (live_chains_.valid() &&
      live_chains_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    publish_live(live_chains_.get());
  }
  if (final || live_chains_.valid() || mono < next_chains_) return;
  start_live_analysis(mono);
}

// An analysis that could not read its window whole would publish chains and steps computed
// from part of it (a chains gauge emptied, a step's idle share from missing events): the last
// ones published stand instead, and the failure is said once.
void Trace::publish_live(const LiveAnalysis& la) {
  if (!la.error.empty()) {
    if (!live_warned_)
      std::cerr << "ingero: the live analysis (chains and steps for /metrics and OTLP) could not "
                   "read the trace; the last published stand: "
                << la.error << "\n";
    live_warned_ = true;
    return;
  }
  (void)sinks_.on_chains(la.chains, clock_.now());
  std::vector<hal::StepSample> fresh;
  int64_t last = steps_observed_to_;
  for (const auto& [end, sample] : la.steps)
    if (end > steps_observed_to_) {
      fresh.push_back(sample);
      last = std::max(last, end);
    }
  steps_observed_to_ = last;
  (void)sinks_.on_steps(fresh);
}

void Trace::start_live_analysis(int64_t mono) {
  pipeline_->commit();
  std::string db = db_;
  // The last 5 minutes of this session: a file reused for a new session holds the chains of
  // the ones before, which are not this session's to report (or send as alerts again).
  int64_t to = clock_.now(), from = std::max<int64_t>(to - 300'000'000'000LL, si_.started_at_ns);
  live_chains_ = std::async(std::launch::async, [db, from, to] {
    LiveAnalysis out;
    auto reader = store::TraceReader::open(db, {}, builtin_error_codes());
    if (!reader) {
      out.error = reader.error().message;
      return out;
    }
    store::SqlTraceSource source(**reader);
    source.set_call_cache(0);  // the tracer's memory stays bounded (docs/performance.md)
    engine::Window w;
    w.from_ns = from;
    w.to_ns = to;
    // Without a cache every rule reads the window again: at a launch-bound rate five minutes
    // are ~15 M calls, more than 30 s of work. The last 5 minutes, or fewer whole seconds when
    // those hold over 1,000,000 calls.
    engine::EngineOptions eo = tracer_engine_options();
    w.from_ns = source.recent_start(w, eo.model_calls);
    eo.model_calls = 0;  // the whole window is those seconds already: no second look-up
    eo.kernels = false;  // only severities and steps are kept of it
    auto a = engine::analyze(source, w, eo);
    if (!source.error().empty()) {
      out.error = source.error();
      return out;
    }
    out.chains = std::move(a.chains);
    for (const auto& s : a.steps.processes)
      for (const auto& st : s.steps)
        if (!st.warmup && st.duration())
          out.steps.push_back({st.end_ns,
                               {double(st.duration()) / 1e9,
                                double(st.gpu_idle_ns) / double(st.duration()), st.gpu_busy}});
    return out;
  });
  // Test-only: INGERO_TEST_LIVE_ANALYSIS_MS runs it more often, so a test sees several.
  static const int64_t every_ns = [] {
    const char* ms = getenv("INGERO_TEST_LIVE_ANALYSIS_MS");
    return ms && atoll(ms) > 0 ? atoll(ms) * 1'000'000LL : 30'000'000'000LL;
  }();
  next_chains_ = mono + every_ns;
}

}  // namespace ingero::app::trace_detail
