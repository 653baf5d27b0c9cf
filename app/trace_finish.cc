// The end of a trace session (app/trace_session.h): the command stopped, the rings drained, the
// session's chains and row stored, the summary printed.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/commands.h"
#include "app/session_chains.h"
#include "app/terminal_text.h"
#include "app/trace_session.h"
#include "app/trace_summary.h"
#include "engine/json_text.h"

namespace ingero::app::trace_detail {

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

// The session's chains the live analysis had not sent become log records, then the last
// metrics; delivery ends by --otlp-exit-timeout, and what it sent and dropped goes into the
// session row's bpf_stats (otlp_*).
void Trace::finish_otlp(const std::vector<engine::Chain>& chains, store::SessionEnd& end) {
  if (!chains.empty()) (void)otlp_->on_chains(chains, clock_.now());
  auto left = std::chrono::milliseconds(int64_t(opts_.otlp_exit_timeout_s * 1000));
  otlp_->finish(std::chrono::steady_clock::now() + left);
  nlohmann::json j = nlohmann::json::parse(end.bpf_stats_json, nullptr, false);
  if (j.is_discarded()) j = nlohmann::json::object();
  add_otlp_stats(j, otlp_->stats());
  end.bpf_stats_json = engine::json_text(j);
}

int Trace::finish() {
  uint64_t attached = stop_recording();
  auto stats = session_->stats();
  store::SessionEnd end = session_end(stats, attached);
  // The rings are read out: unmapping them before the session's analysis makes the peak
  // memory the larger of tracing and analysing, not their sum.
  pipeline_->catch_up_stacks = nullptr;
  reader_.reset();
  // So are the stacks: the processes' maps and the symbol tables read for them go too.
  if (stacks_) stacks_->release();
  size_t nchains = store_analysis(end);
  // The chains took the file past --max-db-size after the last pass (40 short processes, 150
  // chains: 1.2 MiB at S = 1 MiB, nothing deleted): one more, before the file closes.
  if (opts_.max_db_bytes) apply_retention(true);
  auto fin = finish_writing(end);
  if (!opts_.quiet) print_stopped(stats, nchains);
  if (uint64_t n = stats[INGERO_STAT_CHILDREN_UNFOLLOWED])  // a loss: even with -q
    std::cerr << "ingero: " << n
              << " child processes of the traced ones were not traced: the pid filter was full "
                 "(more traced processes alive at once than it holds)\n";
  return exit_status(end, fin);
}

uint64_t Trace::stop_recording() {
  stop_child();
  // No call can start after this: the probes go, then everything already recorded is read.
  // The probe table outlives the detach: records still in the rings name their probes by it.
  uint64_t attached = probes_->attached_probes();
  // What is still stuck is recorded as such: the frames read last are the state at the end.
  if (inflight_) {
    inflight_->tick(uint64_t(mono_now_ns()));
    inflight_->stop(uint64_t(mono_now_ns()));
  }
  hal::HandOff off = probes_->detach();
  if (!opts_.quiet && off.pid > 0)
    std::cerr << "ingero: " << off.perf_events << " perf-event probes detached; process " << off.pid
              << " (ingero-detach) frees them in the background: this kernel frees them one at a "
                 "time\n";
  else if (!opts_.quiet && !off.error.empty())
    std::cerr << "ingero: freeing the perf-event probes here, one at a time (~0.1 s each): no "
                 "process could hold them: "
              << off.error << "\n";
  // The launches still waiting in CPUs' batches go to the ring first (bpf/launch_batch.h).
  (void)session_->ship_launch_batches(
      0, [this](const void* d, size_t n) { pipeline_->on_record(d, n); });
  (void)reader_->drain();
  pipeline_->end_cycle(true);
  int64_t mono = mono_now_ns();
  for (auto& p : periodic_)
    if (p.at_end) p.run(mono, true);
  if (live_chains_.valid()) live_chains_.wait();
  live_line(true);
  if (cmd_.started() && !cmd_.done() && !g_stop_signal && !opts_.quiet)
    std::cerr << "ingero: the traced command (pid " << cmd_.pid()
              << ") is still running, untraced\n";
  say_descendants_left();
  return attached;
}

store::SessionEnd Trace::session_end(const hal::BpfStats& stats, uint64_t attached) const {
  store::SessionEnd end;
  end.stopped_at_ns = clock_.now();
  end.attached_probes = attached;
  end.counters = session_counters(stats, pipeline_->counters().call_records, true);
  end.bpf_stats_json = stats_json(stats, *pipeline_, stacks_.get(), kernels_.get());
  nlohmann::json j = nlohmann::json::parse(end.bpf_stats_json, nullptr, false);
  if (j.is_object()) {
    // Without sessions: launches timed in windows.
    if (probes_->window_plan().period_ns) j["launch_windows_opened"] = probes_->windows_opened();
    j["lookup_probes_rested"] = lookup_rest_.rests();  // capture/lookup_rest.h
    j["lookup_wakes"] = lookup_rest_.wakes();
    end.bpf_stats_json = engine::json_text(j);
  }
  end.exit_reason = exit_reason_;
  return end;
}

size_t Trace::store_analysis(store::SessionEnd& end) {
  // Before the session's analysis, committed: it says what was lost and could not be named.
  auto naming = kernel_naming();
  (void)sinks_.on_session_counters(end.counters, naming ? &*naming : nullptr);
  pipeline_->commit();
  size_t nchains = 0;
  std::vector<engine::Chain> chains;
  const uint64_t failed_before = writer_->failed();
  if (auto c = store_session_chains(*writer_, db_, si_.node, si_.started_at_ns, end.stopped_at_ns,
                                    *tenants_, otlp_ ? &chains : nullptr))
    nchains = *c;
  else {
    // A write that lost events is their cause; a read of the analysis lost none.
    if (writer_->failed() > failed_before) chains_error_ = c.error().message;
    if (!opts_.quiet)
      TerminalText(std::cerr) << "ingero: causal chains not stored: " << c.error().message << "\n";
  }
  if (otlp_) finish_otlp(chains, end);
  return nchains;
}

ingero::Status Trace::finish_writing(const store::SessionEnd& end) {
  // One bound on shipping at exit: the pass in flight (a stalled ClickHouse held it for its
  // 30 s request timeout) and then the last pass, connects and reads included, share
  // --clickhouse-exit-timeout; the writer's own finish between them is not shipping.
  using SteadyClock = std::chrono::steady_clock;
  auto ship_left = std::chrono::milliseconds(int64_t(opts_.clickhouse_exit_timeout_s * 1000));
  // A second stop signal gives up waiting for ClickHouse: only SIGKILL ended a tracer whose
  // --clickhouse-exit-timeout was long and ClickHouse away. What is left ships later.
  std::atomic<bool> shipped{false};
  std::thread give_up;
  if (shipper_)
    give_up = std::thread([this, &shipped] {
      while (!shipped.load()) {
        if (g_stop_signals >= 2) {
          shipper_->set_deadline(SteadyClock::now());
          std::cerr << "ingero: " << signal_name(g_stop_signal)
                    << " again: stopped waiting for ClickHouse\n";
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  if (shipper_) {
    auto t0 = SteadyClock::now();
    if (g_stop_signals < 2) shipper_->set_deadline(t0 + ship_left);
    shipper_->stop();  // finish() checkpoints: no reader may hold the file
    ship_left -= std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t0);
  }
  auto fin = writer_->finish(end);
  if (writer_->left_in_wal()) {
    std::string why = writer_->left_in_wal_why();
    if (why.starts_with(db_ + ": ")) why.erase(0, db_.size() + 2);  // the file is named once
    std::cerr << "ingero: " << db_ << "-wal still holds part of the trace: "
              << (why.empty()
                      ? "a reader (a report or an export of it) kept reading past the end "
                        "for over " +
                            engine::format_duration(uint64_t(writer_->end_wait_ms()) * 1000000)
                      : "folding it into the file failed (" + why + ")")
              << "; copy it with " << db_ << " (every ingero command reads the two together)\n";
  }
  if (shipper_) {
    auto deadline = SteadyClock::now() + std::max(ship_left, std::chrono::milliseconds(0));
    if (g_stop_signals < 2) shipper_->set_deadline(deadline);
    finish_shipping(*shipper_, db_, opts_.quiet, deadline);
  }
  shipped = true;
  if (give_up.joinable()) give_up.join();
  return fin;
}

void Trace::print_stopped(const hal::BpfStats& stats, size_t nchains) const {
  // The command's name, paths and the store's messages are anyone's bytes.
  TerminalText err(std::cerr);
  const auto& pc = pipeline_->counters();
  err << "ingero: stopped (" << exit_reason_ << "): " << pc.calls << " calls (" << pc.nested
      << " nested calls folded into them) and " << pc.host << " host events decoded, " << nchains
      << " causal chains, " << writer_->written() << " events stored in " << db_;
  // What retention deleted since, so that the figure agrees with the file.
  const uint64_t gone = writer_->retention_calls() + writer_->retention_events();
  if (gone)
    err << ", " << writer_->written() - std::min(gone, writer_->written())
        << " of them kept after retention";
  struct stat st {};
  if (stat(db_.c_str(), &st) == 0) err << " (" << human_bytes(double(st.st_size)) << ")";
  err << "\n";
  if (stacks_) print_stacks_summary(err, stats, *stacks_);
  if (kernels_) print_kernel_names_summary(err, *kernels_);
  if (writer_->retention_deleted())
    err << "ingero: retention deleted " << writer_->retention_deleted()
        << " rows past the policy (--retain/--max-db-size): " << writer_->retention_calls()
        << " calls, " << writer_->retention_events() << " host events and "
        << writer_->retention_deleted() - std::min(writer_->retention_deleted(), gone)
        << " other rows"
        << (shipper_ ? ", " + std::to_string(writer_->retention_unshipped()) +
                           " of them before ClickHouse had them"
                     : "")
        << "; longest pass " << engine::format_duration(uint64_t(retention_pause_max_ns_)) << "\n";
  if (folded_)
    err << "ingero: " << folded_
        << " calls older than --full-rows keep only their folded form (launches in runs; "
           "per-second summaries keep every call); longest pass "
        << engine::format_duration(uint64_t(fold_pause_max_ns_)) << "\n";
  if (auto tc = tenants_->cost(); tc.named)
    err << "ingero: named " << tc.named << " of " << tc.cgroups
        << " cgroups (pod, namespace, container: cgroup_metadata) from " << tc.reads
        << " files read in " << engine::format_duration(uint64_t(tc.ns)) << "\n";
  if (pc.unknown_probe || pc.malformed)
    err << "ingero: " << pc.unknown_probe + pc.malformed << " records could not be decoded\n";
}

int Trace::exit_status(const store::SessionEnd& end, const ingero::Status& fin) {
  int code = kExitOk;
  TerminalText err(std::cerr);      // paths and the store's messages are anyone's bytes
  print_losses(err, end.counters);  // even with -q: the figures are lower bounds
  if (otlp_) print_otlp_summary(err, *otlp_, opts_.quiet);  // its drops even with -q
  if (writer_->failed() || !fin) {
    // The causes, each once (the writer's last failure is often the finish's too); the file is
    // named once, by them where the store's messages name it already.
    // One said in the other's words ("F: disk is full" and "writing F: disk is full") is
    // said once, in the longer (TraceCuda.FullDiskIsAClearErrorAndKeepsCommittedData, 1 in 5).
    std::string cause = sinks_.last_error();
    if (cause.empty()) cause = chains_error_;  // the last events went with the chains
    if (!fin) {
      const std::string& f = fin.error().message;
      if (f.find(cause) != std::string::npos)
        cause = f;
      else if (cause.find(f) == std::string::npos)
        cause += "; " + f;
    }
    std::string file = cause.find(db_) == std::string::npos ? " to " + db_ : "";
    if (writer_->failed())
      err << "ingero: " << writer_->failed() << " events could not be written" << file;
    else
      err << "ingero: the trace could not be finished" << file;
    err << (cause.empty() ? "" : ": " + cause) << "\n";
    code = kExitFailure;
  }
  if (db_gone_) {
    err << "ingero: " << db_
        << " was removed or replaced while tracing: the events written since went into a file "
           "no path names, and are lost\n";
    code = kExitFailure;
  }
  if (!opts_.quiet) cmd_.describe_end(err);
  // A command that outlived the signal's grace has no status yet: the tracer was stopped by
  // that signal, and says so as a shell would (128 + N), not success.
  if (cmd_.started() && !cmd_.done() && g_stop_signal) return 128 + g_stop_signal;
  // With a command, its status (128 + N when a signal ended it), as time(1) and strace(1) do;
  // the tracer's own failures are on stderr and in the session row. Without one, the tracer's.
  return cmd_.exit_code(code);
}

}  // namespace ingero::app::trace_detail
