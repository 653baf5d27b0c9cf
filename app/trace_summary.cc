#include "app/trace_summary.h"

#include <iterator>
#include <nlohmann/json.hpp>

#include "capture/inflight_monitor.h"
#include "capture/launch_nesting.h"
#include "engine/json_text.h"
#include "engine/loss_notes.h"

namespace ingero::app {

store::SessionCounters session_counters(const hal::BpfStats& s, uint64_t calls_read, bool drained) {
  store::SessionCounters c;
  c.call_drops = s[INGERO_STAT_RINGBUF_DROPS];
  c.stack_drops = s[INGERO_STAT_STACK_DROPS];
  c.host_drops = s[INGERO_STAT_HOST_DROPS];
  c.sample_drops = s[INGERO_STAT_SAMPLE_DROPS];
  c.lost_calls = s[INGERO_STAT_THREAD_MAP_FULL] + s[INGERO_STAT_DEPTH_OVERFLOW];
  c.unfinished_calls = s[INGERO_STAT_UNFINISHED];
  uint64_t submitted = s[INGERO_STAT_CALLS];
  if (drained && submitted > calls_read) c.calls_lost_at_exit = submitted - calls_read;
  return c;
}

std::string stats_json(const hal::BpfStats& stats, const capture::EventPipeline& pipeline,
                       const capture::StackCollector* stacks, const capture::KernelNamer* kernels) {
  nlohmann::json sj;
  const char* names[] = {"calls",           "ringbuf_drops",      "thread_map_full",
                         "depth_overflow",  "unpaired_return",    "frames_discarded",
                         "unfinished",      "host_drops",         "host_records",
                         "selftest",        "stacks_shipped",     "stacks_sampled",
                         "stack_drops",     "py_walks",           "py_faults",
                         "nested",          "stacks_of_site",     "stack_walks",
                         "cpu_samples",     "sample_drops",       "libwatch_drops",
                         "untimed",         "returns_detached",   "launch_batches",
                         "site_lookups",    "name_asked_again",   "name_answered_again",
                         "untimed_returns", "children_unfollowed"};
  static_assert(std::size(names) == INGERO_STAT_MAX, "name every BPF counter");
  for (int i = 0; i < INGERO_STAT_MAX; ++i) sj[names[i]] = stats.v[i];
  const auto& pc = pipeline.counters();
  sj["call_records_read"] = pc.call_records;
  sj["unknown_probe_records"] = pc.unknown_probe;
  sj["malformed_records"] = pc.malformed;
  sj["libwatch_records"] = pc.libwatch;
  sj["threads_without_ident"] = pc.no_ident;
  sj["untimed_calls"] = pc.untimed;
  if (pipeline.nesting) {  // capture/launch_nesting.h
    const auto& n = pipeline.nesting->counters();
    sj["launches_folded"] = n.folded;
    sj["launches_folded_by_order"] = n.folded_by_order;
    sj["launches_timed_by_driver"] = n.timed_by_driver;
    sj["launches_renamed"] = n.renamed;
    sj["runtimes_detached"] = n.proven;
  }
  if (pipeline.inflight) {  // capture/inflight_monitor.h
    const auto& f = pipeline.inflight->counters();
    sj["inflight_ticks"] = f.ticks;
    sj["inflight_frames_read"] = f.frames;
    sj["inflight_reported"] = f.reported;
    sj["inflight_idle_reported"] = f.idle;
    sj["inflight_stale_frames"] = f.stale;
    sj["inflight_read_errors"] = f.read_errors;
    sj["inflight_cpu_ns"] = f.cpu_ns;
  }
  sj["kernel_name_records"] = pc.name_records;
  for (const auto& [op, n] : pc.name_records_by_op) sj["kernel_name_records_by_op"][op] = n;
  sj["delivery_lag_p50_us"] = pipeline.delivery_lag_quantile_ns(0.50) / 1000;
  sj["delivery_lag_p99_us"] = pipeline.delivery_lag_quantile_ns(0.99) / 1000;
  if (kernels) {
    const auto& k = kernels->counters();
    sj["kernel_names"] = k.names;
    sj["kernel_name_captures"] = k.captures;
    sj["kernel_name_repeats"] = k.repeats;
    sj["kernel_names_unreadable"] = k.unreadable;
    sj["kernel_named_launches"] = k.named_launches;
    sj["kernel_unnamed_launches"] = k.unnamed_launches;
    // Read back by explain (store/kernel_names.cc): the unnamed first launched while the
    // kernel look-ups rested.
    sj["unnamed_functions_at_rest"] = k.unnamed_at_rest;
    sj["kernel_entries_dropped"] = k.dropped;
    sj["kernel_names_unkept"] = k.unkept;
  }
  if (stacks) {
    const auto& sc = stacks->counters();
    sj["stacks_distinct"] = sc.stored;
    sj["stack_unknown_refs"] = sc.unknown_refs;
    sj["stack_records_empty"] = sc.empty;
    sj["stack_maps_rereads"] = sc.maps_rereads;
    sj["stack_native_frames"] = sc.native_frames;
    sj["stack_unresolved_frames"] = sc.unresolved;
    sj["stack_python_frames"] = sc.python_frames;
    sj["stack_python_invalid"] = sc.python_invalid;
    sj["stack_python_gone"] = sc.python_gone;
    sj["stack_python_missing"] = sc.python_missing;
    sj["stack_python_truncated"] = sc.python_truncated;
    sj["stack_python_no_line"] = sc.python_no_line;
    sj["stack_python_processes"] = sc.python_processes;
    sj["stack_python_refused"] = sc.python_refused;
  }
  return engine::json_text(sj);
}

void print_losses(std::ostream& out, const store::SessionCounters& c) {
  // Worded as explain, the report and the MCP tools word them (engine/loss_notes.h), with what
  // to change to lose less.
  engine::TraceLosses l;
  l.by_kind = true;
  l.call_drops = c.call_drops;
  l.stack_drops = c.stack_drops;
  l.host_drops = c.host_drops;
  l.sample_drops = c.sample_drops;
  l.lost_calls = c.lost_calls;
  l.calls_lost_at_exit = c.calls_lost_at_exit;
  l.store_errors = c.store_errors;
  for (const auto& n : engine::loss_notes(l)) out << "ingero: " << n.text << "\n";
  if (c.call_drops || c.stack_drops || c.host_drops || c.sample_drops)
    out << "ingero: the rings were full: raise --ringbuf-mb to lose less\n";
  if (c.lost_calls)
    out << "ingero: calls go untraced when the thread table is full or nesting is deeper than "
        << INGERO_MAX_DEPTH << "\n";
  if (c.unfinished_calls)
    out << "ingero: " << c.unfinished_calls
        << " calls were still running when their thread exited (stored as unfinished)\n";
}

void print_stacks_summary(std::ostream& out, const hal::BpfStats& stats,
                          const capture::StackCollector& stacks) {
  const auto& sc = stacks.counters();
  out << "ingero: stacks: " << sc.stored << " distinct from " << stats[INGERO_STAT_STACK_WALKS]
      << " walks; " << stats[INGERO_STAT_STACKS_OF_SITE]
      << " calls took their call site's stack without a walk";
  if (sc.python_frames) out << ", " << sc.python_frames << " Python frames";
  if (sc.native_frames)
    out << ", " << sc.unresolved << " of " << sc.native_frames << " native frames unresolved";
  if (sc.python_refused)
    out << ", " << sc.python_refused
        << " Python processes with native frames only (interpreter not verified)";
  if (sc.python_invalid) out << ", " << sc.python_invalid << " Python frames dropped (unverified)";
  if (sc.python_gone)
    out << ", " << sc.python_gone
        << " Python frames lost (the process exited before they were read)";
  if (sc.python_truncated)
    out << ", " << sc.python_truncated << " stacks deeper than " << INGERO_PY_MAX
        << " Python frames (their outer frames are not in them)";
  if (sc.python_no_line)
    out << ", " << sc.python_no_line
        << " Python frames without a line (a line table longer than was copied, and the "
           "process exited before the rest was read)";
  if (sc.unknown_refs) out << ", " << sc.unknown_refs << " calls lost their stack record";
  if (sc.empty)
    out << ", " << sc.empty << " stacks with no readable frame (a broken frame-pointer chain)";
  out << "\n";
}

}  // namespace ingero::app

namespace ingero::app {

void print_kernel_names_summary(std::ostream& out, const capture::KernelNamer& namer) {
  const auto& k = namer.counters();
  if (!k.names && !k.unnamed_launches && !k.unreadable) return;
  out << "ingero: kernel names: " << k.names;
  const char* what[] = {"", "registration", "driver look-ups", "ELF symbols"};
  std::string parts;
  for (size_t i = 1; i < 4; ++i)
    if (k.by_source[i])
      parts += (parts.empty() ? "" : ", ") + std::to_string(k.by_source[i]) + " " + what[i];
  if (!parts.empty()) out << " (" << parts << ")";
  if (k.unnamed_launches)
    out << "; " << k.unnamed_launches << " launches of " << k.unnamed_functions
        << " functions have none (registered before the trace began in a file without "
           "symbols, or named by what could not be read)";
  if (k.unnamed_at_rest)
    out << "; " << k.unnamed_at_rest << " of those functions "
        << (k.unnamed_at_rest == 1 ? "was" : "were")
        << " first launched while the kernel look-up probes rested, and their library did not "
           "look them up again (--keep-lookup-probes keeps the look-ups attached)";
  if (k.unreadable)
    out << "; " << k.unreadable
        << " names could not be read (the process exited before the tracer read them)";
  out << "\n";
}

}  // namespace ingero::app
