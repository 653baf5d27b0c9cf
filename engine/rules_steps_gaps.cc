// Step rules over host gaps: the GPU idle while the thread that feeds it runs its own code
// (data-loader starvation, host-bound), waits for the disk (blocking I/O), is preempted (CPU
// contention) or sleeps. Thresholds: engine/thresholds_steps.h.
#include <algorithm>

#include "engine/preemptors.h"
#include "engine/rules_steps_internal.h"
#include "engine/thresholds_steps.h"

namespace ingero::engine::step_rules {
namespace {

// On-CPU gaps: the host's own code keeps the GPU idle. When most of that time ends with a
// host-to-device copy (the next batch going up), the code is the data pipeline.
void gap_on_cpu(const Context& x, std::vector<Chain>& out) {
  uint64_t on_cpu = x.m.gap.on_cpu_ns;
  for (const HostGap& g : x.s.gaps)
    if (g.step != kNoStep && !x.s.steps[g.step].warmup && x.charged_elsewhere(g))
      on_cpu -= std::min(on_cpu, g.time.on_cpu_ns);
  double share = x.share(on_cpu);
  if (share < kGapShareLow) return;
  auto sites = gap_sites(x, false, false);
  uint64_t h2d = 0, all = 0;
  for (auto& [st, g] : sites) {
    h2d += g.h2d_ns;
    all += g.ns;
  }
  bool data = h2d * 2 >= all;
  // With worker processes, the gaps' sleep is waiting for them: the same starvation, in this one
  // chain (gap_sleep leaves it), never a second chain under the same id.
  uint64_t asleep = data && !x.workers.empty() && x.share(x.m.gap.sleep_ns) >= kGapShareLow
                        ? x.m.gap.sleep_ns
                        : 0;
  double starved = x.share(on_cpu + asleep);
  const auto* top = top_site(sites);
  std::string where = x.m.gap_where.empty()
                          ? std::string("in its own code")
                          : (x.m.gap_where_sampled ? "in " : "before ") + x.m.gap_where;
  Chain c = x.chain(data ? "data_loader_starvation" : "host_bound", "host_gap", starved);
  c.severity = band(starved, kGapShareMedium, kGapShareHigh);
  // The device's own figure: a host-bound step whose GPU is measured mostly idle is worse than
  // its gaps alone prove.
  if (double idle = x.m.measured_idle(); idle >= 0)
    c.severity = std::max(c.severity, band(idle, kMeasuredIdleMedium, kMeasuredIdleHigh));
  std::string per = x.per_step(on_cpu);
  c.summary = std::string(data ? "Data-loader starvation" : "Host-bound steps") +
              ": the GPU is idle \u2265 " + pct_at_least(starved) + " of each " +
              format_duration(x.m.median_ns) + " step while " + x.who + " runs on-CPU " + where +
              (asleep ? " (" + pct(share) + ") and sleeps waiting for its " +
                            format_count(x.workers.size()) + " worker process(es) (" +
                            pct(x.share(asleep)) + ")"
                      : "");
  c.root_cause = data ? "The training thread builds each batch itself" +
                            std::string(x.workers.empty() ? " (it forked no worker process)" : "") +
                            ": the GPU waits " + per + " per step for the next batch"
                      : "Host code between GPU calls keeps the GPU idle " + per + " per step";
  c.explanation = "Over " + format_count(x.m.steps) + " steady steps the GPU had no work for " +
                  pct(x.m.host_gap) +
                  " of the time while no thread was in a GPU call; the thread " +
                  "was running for " + pct(double(on_cpu) / double(x.m.gap.total())) +
                  " of that (not preempted, not blocked). The host waited for the GPU " +
                  pct(x.m.wait) + " of the step; " + gpu_share_text(x.m) + ".";
  if (top)
    c.explanation += " " + format_count(top->second.count) + " gaps (" +
                     pct(double(top->second.ns) / double(all)) + " of gap time) ended with " +
                     top->second.op + x.at(top->first) +
                     (data ? ", a host-to-device copy: the next batch going up." : ".");
  c.timeline.push_back({"HOST", "host_gap", per + " per step on-CPU with the GPU idle, " + where,
                        on_cpu / std::max<uint64_t>(1, x.m.steps) / 1000});
  if (asleep) {
    c.explanation += " It slept " + pct(x.share(asleep)) +
                     " of the step more in the gaps, waiting for its worker processes.";
    c.timeline.push_back({"HOST", "host_gap",
                          x.per_step(asleep) + " per step asleep, waiting for its " +
                              format_count(x.workers.size()) + " worker process(es)",
                          asleep / std::max<uint64_t>(1, x.m.steps) / 1000});
  }
  if (x.m.gap_where_sampled && x.m.gap_stack)
    c.stacks.push_back(x.located(x.m.gap_stack, StackCounts::kNone, 0, 0, 0, x.s.anchor_tid));
  if (top && top->first) {
    c.stacks.push_back(x.located(top->first, StackCounts::kGaps, top->second.count, x.m.steps,
                                 top->second.worst, top->second.tid));
    c.timeline.push_back({x.layer(top->second.op), top->second.op,
                          "ends " + format_count(top->second.count) + " gaps" + x.at(top->first),
                          0});
  }
  if (data) {
    if (x.workers.empty())
      c.fixes.push_back("Build batches in worker processes (DataLoader num_workers > 0): " + x.who +
                        " forked none, so each batch is built on the training thread");
    else
      c.fixes.push_back("Add data workers or prefetch deeper (num_workers, prefetch_factor): its " +
                        format_count(x.workers.size()) + " worker process(es) do not keep up");
    c.fixes.push_back(
        "Overlap the upload with compute: pinned host memory (pin_memory=True) and an "
        "asynchronous copy (non_blocking=True)");
  }
  c.fixes.push_back(x.m.gap_where_sampled
                        ? "Make " + x.m.gap_where + " cheaper, or move it off the training thread"
                        : "Find the host code that runs " +
                              (x.m.gap_where.empty() ? "between the GPU calls" : where) +
                              " (py-spy, or record on-CPU samples) and move it off the training "
                              "thread or make it cheaper");
  out.push_back(std::move(c));
}

// Uninterruptible sleep in the gaps: the training thread waits for the disk (a synchronous
// checkpoint: write + fsync).
void gap_io(const Context& x, std::vector<Chain>& out) {
  double share = x.share(x.m.gap.io_ns);
  if (share < kIoShareLow) return;
  auto sites = gap_sites(x, true, true);
  const auto* top = top_site(sites);
  uint64_t writes = 0, ios = 0, steps_with = 0;
  for (const auto& [st, g] : sites) {
    writes += g.write_bytes;
    ios += g.ios;
  }
  for (const Step& st : x.s.steps)
    if (!st.warmup && st.gap.io_ns) ++steps_with;
  std::string after =
      top && top->first ? " after " + code_location(x.source.stack(top->first)) : "";
  Chain c = x.chain("blocking_io", "host_gap", share);
  c.severity = band(share, kIoShareMedium, kIoShareHigh);
  c.summary = "Blocking I/O on the training thread: " + x.who + " is blocked on I/O " + pct(share) +
              " of the step time, with the GPU idle" + after + " (" + format_count(steps_with) +
              " of " + format_count(x.m.steps) + " steps)";
  c.root_cause =
      "The training thread waits for the disk (a synchronous write + fsync, such as a "
      "checkpoint) while the GPU has no work";
  c.explanation = "In " + format_count(steps_with) +
                  " steady steps the thread slept in "
                  "uninterruptible I/O waits for " +
                  x.per_step(x.m.gap.io_ns) + " per step on average with no GPU work queued; " +
                  format_count(ios) + " block requests of the process (" + format_bytes(writes) +
                  " written) ran inside those gaps.";
  c.timeline.push_back(
      {"IO", "block_io",
       format_count(ios) + " block requests, " + format_bytes(writes) + " written, inside the gaps",
       0});
  c.timeline.push_back({"HOST", "host_gap",
                        x.per_step(x.m.gap.io_ns) + " per step blocked on I/O" + after,
                        x.m.gap.io_ns / std::max<uint64_t>(1, x.m.steps) / 1000});
  if (top && top->first)
    c.stacks.push_back(x.located(top->first, StackCounts::kGaps, top->second.count, x.m.steps,
                                 top->second.worst, top->second.tid));
  c.fixes.push_back(
      "Take the write off the training thread: asynchronous checkpointing (copy "
      "the state, then write and fsync it in a background thread or process)");
  if (steps_with * 2 > x.m.steps)
    c.fixes.push_back("Write less often: it blocks " + format_count(steps_with) + " of " +
                      format_count(x.m.steps) + " steps");
  out.push_back(std::move(c));
}

// The threads that feed the GPU lose their CPU. In a host-bound step (the host hardly waits
// for the GPU) every preempted millisecond is a step millisecond; otherwise only the
// preemption inside host gaps (the GPU idle) costs step time.
void step_contention(const Context& x, std::vector<Chain>& out) {
  bool host_bound = x.m.wait < kHostBoundMaxWait;
  double share = host_bound ? x.m.preempted : x.share(x.m.gap.preempted_ns);
  if (share < kPreemptedShareLow) return;
  // Where the threads lost the CPU: the GPU call they made next after being preempted (host
  // code runs between calls, so that is where a preemption usually lands), with its stack.
  std::string op = x.m.preempted_op.empty() ? "sched_switch" : x.m.preempted_op;
  Chain c = x.chain("cpu_contention", op, share);
  if (x.m.preempted_stack)
    c.stacks.push_back(x.located(x.m.preempted_stack, StackCounts::kPreempted, 0, x.m.steps,
                                 x.m.preempted_before_ns, x.m.preempted_tid));
  c.id = "cpu_contention:steps:" + std::to_string(x.s.pid);
  c.severity = band(share, kPreemptedShareMedium, kPreemptedShareHigh);
  const Preemptor* top = x.m.preemptors.empty() ? nullptr : &x.m.preemptors[0];
  std::string by = top ? preemptor_name(x.a, *top, x.s.pid) : "other tasks";
  const std::string& preempted_by = x.m.preempted_by;  // the tracer named (name_tracer)
  // "Mostly" where it took most of the time; else its share: noisy_neighbor took 23% of the
  // H100 loop's, its own threads 51%, and the summary said "mostly by noisy_neighbor".
  const double top_share =
      top && x.m.preemptors_ns ? double(top->off_ns) / double(x.m.preemptors_ns) : 0;
  c.summary =
      "CPU contention in the training steps: the threads of " + x.who +
      " that feed the GPU were preempted " + pct(share) + " of the step time" +
      (host_bound ? "" : " while the GPU was idle") +
      (!top || top_share >= 0.5 ? ", mostly by " + by : ", " + pct(top_share) + " of it by " + by);
  c.root_cause = "The threads that feed the GPU are runnable but not running: " + by +
                 " holds their CPU" +
                 (host_bound ? ", and the host sets the step time (it waits for the GPU only " +
                                   pct(x.m.wait) + " of the step)"
                             : " while the GPU has no work");
  c.explanation = "Over " + format_count(x.m.steps) + " steady steps (median " +
                  format_duration(x.m.median_ns) + ") a GPU-feeding thread was preempted " +
                  pct(x.m.preempted) + " of the time, " + pct(x.share(x.m.gap.preempted_ns)) +
                  " with the GPU idle. Preempted by: " + preempted_by + ".";
  uint64_t ns = host_bound ? uint64_t(x.m.preempted * double(x.m.total_ns)) : x.m.gap.preempted_ns;
  c.timeline.push_back({"HOST", "sched_switch",
                        x.per_step(ns) + " per step preempted; by " + preempted_by,
                        ns / std::max<uint64_t>(1, x.m.steps) / 1000});
  c.fixes.push_back("Give the GPU-feeding threads cores of their own (taskset -c, a cpuset)" +
                    std::string(top && top->pid != x.s.pid ? ", away from " + by : ""));
  for (std::string& f : preemptor_fixes(x.a, x.s.pid, x.m.preemptors, x.workers))
    c.fixes.push_back(std::move(f));
  out.push_back(std::move(c));
}

// Sleeping in the gaps: waiting on a queue, a lock or a timer; with worker processes, on them.
void gap_sleep(const Context& x, std::vector<Chain>& out) {
  double share = x.share(x.m.gap.sleep_ns);
  if (share < kGapShareLow) return;
  bool workers = !x.workers.empty();
  // Waiting for workers beside on-CPU starvation is in gap_on_cpu's chain already.
  const std::string merged = "data_loader_starvation:" + std::to_string(x.s.pid);
  if (workers &&
      std::any_of(out.begin(), out.end(), [&](const Chain& c) { return c.id == merged; }))
    return;
  auto sites = gap_sites(x, false, false);
  const auto* top = top_site(sites);
  std::string before =
      top && top->first ? " before " + code_location(x.source.stack(top->first)) : "";
  Chain c = x.chain(workers ? "data_loader_starvation" : "host_wait", "host_gap", share);
  c.severity = band(share, kGapShareMedium, kGapShareHigh);
  c.summary =
      std::string(workers ? "Data-loader starvation" : "Host waiting") +
      ": the GPU is idle \u2265 " + pct_at_least(share) + " of the step time while " + x.who +
      " sleeps" + before +
      (workers ? " waiting for its " + format_count(x.workers.size()) + " worker process(es)" : "");
  c.root_cause = workers ? "The training thread waits for batches its workers have not finished"
                         : "The training thread sleeps (a lock, a queue, a timer) while the GPU "
                           "has no work";
  c.explanation = x.m.text + ".";
  c.timeline.push_back({"HOST", "host_gap",
                        x.per_step(x.m.gap.sleep_ns) + " per step asleep" + before,
                        x.m.gap.sleep_ns / std::max<uint64_t>(1, x.m.steps) / 1000});
  if (top && top->first)
    c.stacks.push_back(x.located(top->first, StackCounts::kGaps, top->second.count, x.m.steps,
                                 top->second.worst, top->second.tid));
  if (workers)
    c.fixes.push_back(
        "Add workers or prefetch deeper (num_workers, prefetch_factor, "
        "persistent_workers=True)");
  else
    c.fixes.push_back("Find what the thread waits for" + before +
                      " (py-spy dump) and take it off the training path");
  out.push_back(std::move(c));
}

}  // namespace

void gap_rules(const Context& x, std::vector<Chain>& out) {
  gap_on_cpu(x, out);
  gap_io(x, out);
  step_contention(x, out);
  gap_sleep(x, out);
}

}  // namespace ingero::engine::step_rules
