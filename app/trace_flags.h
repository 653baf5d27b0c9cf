// The flags of `ingero trace`, by what they decide: what is traced, how calls are captured,
// what the host side watches, what is kept on disk, where the trace is exported. Each adds its
// options to the command; resolve() turns the ones written as text into TraceOptions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/tracer.h"

namespace ingero::app::trace_flags {

// What the flags give as text (durations, sizes) or that is not a TraceOptions field.
struct Args {
  bool rdma_verbs = false;  // chooses the backends the tracer is given
  std::string duration, retain, full_rows, max_size;
  std::string ship_exit = "10s", inflight_after = "5s";
  std::string otlp_interval = "10s", otlp_threshold = "1ms", otlp_exit = "10s";
  std::vector<uint32_t> pids;
};

// What and how long: processes, the command's scope, the trace file, the node, output.
void add_target(CLI::App& cmd, TraceOptions& o, Args& a);
// How calls are captured: kernel names, stacks, launch timing and probes, CPU samples.
void add_calls(CLI::App& cmd, TraceOptions& o, Args& a);
// The host side: rings, commits, devices, the tracer's priority, calls in flight, tenants.
void add_host(CLI::App& cmd, TraceOptions& o, Args& a);
// What stays on disk: retention, the size limit, full rows.
void add_storage(CLI::App& cmd, TraceOptions& o, Args& a);
// Where the trace goes while tracing: Prometheus, ClickHouse, OTLP.
void add_export(CLI::App& cmd, TraceOptions& o, Args& a);

// Said of `--backends ''`, by trace and check alike.
inline constexpr const char* kEmptyBackends =
    "an empty list names no backend (leave --backends out to use every one)";

// A duration with its unit (500ms, 30s, 5m, 1h, 7d), in a config file as on the command line:
// a bare number (`duration = 12`: 12 what?) is refused. `examples` are named in the error.
CLI::Validator duration_check(const std::string& examples);

// The text flags into `o` (their validators have accepted them), and the session's flags
// column (docs/schema.md, sessions.flags).
void resolve(const Args& a, TraceOptions& o);
// Flags given together that cannot both hold, or one given that does nothing without another
// (what `cmd` holds, from the command line or a config file): why, for a usage error; none.
// `--all --pid P -- COMMAND` traced neither every process nor the command (0 calls, exit 0).
// Without `with_command`, what depends on the COMMAND is not judged (a config file's [trace]
// table alone, which gives none).
std::optional<std::string> conflict(const CLI::App& cmd, bool with_command = true);
std::string session_flags(const TraceOptions& o, bool rdma_verbs);
// What the chosen flags will not do that a user may expect of them: a line for stderr, said
// once before tracing starts; none. `--backends rdma` without `--rdma-verbs` attached 0 probes
// without a word.
std::optional<std::string> notice(const TraceOptions& o, bool rdma_verbs);

}  // namespace ingero::app::trace_flags
