// The report's data model: one JSON document, built from a trace by the engine, passes over
// the calls it reads (call_census.h, call_pass.h) and a few SQL reads (report_sql.h), that the
// one-file HTML report embeds and the dashboard serves at /api/report.
//
// Never raw rows. Every array in it is bounded by ReportOptions (steps are averaged in groups,
// time series have at most max_rate_buckets points, tables are capped and say so), so the
// document stays a few hundred KiB whatever the trace's size; docs/performance.md has the
// figures at 10 M events.
//
// The engine's sections (steps, kernels, chains, ops, processes, tenants) are the engine's one
// JSON shape (engine/result_json.h) with the report's own keys added (serve/report/engine_json.h).
//
// Sections (docs/cli.md, "ingero report", describes what each shows):
//   format, version, generated_at_ns, trace{path, format, legacy}, window{start_ns, end_ns}
//   header{sessions[], nodes[], calls, events, host_events, processes, errors, unfinished,
//          loss{ringbuf_drops, lost_calls, store_errors, unfinished_calls}, live, warnings[]}
//   steps[]        per (node, process): cadence, summary, columnar per-step breakdown
//   kernels{named, unnamed_launches, unnamed_functions, processes[]}  per (node, process): its
//                  kernels (launches, per step, launching line) and launches per step by kernel
//   rates          per-op calls per second and approximate p50/p99 per time bucket
//   chains[]       the engine's causal chains, HIGH first
//   flame{calls, samples}  stack trees of the slow calls (>= their op's p95) and on-CPU samples
//   ops[]          per-op statistics (exact p50/p95/p99) and a latency histogram
//   processes[], nodes[], collectives[], host{}
//   tenants{named, rows[], preemptions[]}  per pod/container (engine/tenants.h), each node's
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "store/trace_reader.h"

namespace ingero::serve::report {

inline constexpr int kModelVersion = 1;

struct ReportOptions {
  std::string title;  // the trace as the user named it
  // Time window in Unix ns (the whole trace by default); the pid restriction is not used.
  engine::Window window;
  size_t max_step_points = 1500;  // per process; more steps are averaged in equal groups
  size_t max_step_processes = 8;  // step series (the page draws these): those with most steps
  size_t max_rate_buckets = 600;  // time buckets of the per-op rates (each >= 1 s)
  size_t max_rate_ops = 10;       // ops with their own rate series; the rest sum into "other"
  size_t max_processes = 300;     // rows of the per-process table
  size_t max_flame_nodes = 20000;
  size_t max_chains = 100;
  size_t max_collective_ranks = 512;  // per (communicator, op)
  size_t max_kernel_rows = 50;        // kernels per process in the kernels-per-step table
};

// Builds the model. `reader` and `source` read the same file (source is the engine's view of
// it). SQL errors are Errors naming the statement's purpose; the engine's own read errors are
// the caller's to check on its source afterwards.
Result<nlohmann::json> build_report(store::TraceReader& reader, engine::TraceSource& source,
                                    const ReportOptions& options);

}  // namespace ingero::serve::report
