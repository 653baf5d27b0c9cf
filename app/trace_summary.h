// What `ingero trace` says about a session: its losses by kind (the session row, stderr even
// with -q), every in-kernel counter as JSON, and the closing summary.
#pragma once

#include <ostream>
#include <string>

#include "capture/event_pipeline.h"
#include "capture/kernel_namer.h"
#include "capture/stack_collector.h"
#include "probe/bpf_session.h"
#include "store/trace_writer.h"

namespace ingero::app {

// Losses so far. `calls_read`: call records the pipeline read; what BPF submitted beyond them
// and never reached it is lost at exit (only meaningful once the rings were drained).
store::SessionCounters session_counters(const hal::BpfStats& s, uint64_t calls_read, bool drained);

// Every counter of the BPF side and the pipeline, for sessions.bpf_stats.
std::string stats_json(const hal::BpfStats& s, const capture::EventPipeline& p,
                       const capture::StackCollector* stacks,
                       const capture::KernelNamer* kernels = nullptr);

// One line per kind of loss, worded as explain words it ("12 calls lost (12 ring buffer full):
// figures are lower bounds"), then what to change to lose less; nothing when nothing was lost.
// Printed even with -q.
void print_losses(std::ostream& out, const store::SessionCounters& c);

// The closing summary (not with -q).
void print_stacks_summary(std::ostream& out, const hal::BpfStats& s,
                          const capture::StackCollector& stacks);
// "kernel names: 4 (4 registration); 12 launches of 2 functions have none", nothing when no
// launch or name was seen.
void print_kernel_names_summary(std::ostream& out, const capture::KernelNamer& k);

}  // namespace ingero::app
