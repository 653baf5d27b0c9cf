#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/config_file.h"
#include "app/tracer.h"
#include "engine/window_spec.h"
#include "fleet/clickhouse_endpoint.h"

namespace ingero::app {
namespace {

// "2GiB", "500MiB", "64KiB" (binary), "1GB", "500MB" (decimal), "4096" (bytes); 0 if malformed.
uint64_t parse_size(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (...) {
    return 0;
  }
  std::string unit = text.substr(end);
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},          {"B", 1},
      {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1 << 30}, {"TiB", 1099511627776.0},
      {"KB", 1e3},      {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12}};
  for (const auto& [u, mult] : kUnits)
    if (unit == u) return v > 0 ? uint64_t(v * mult) : 0;
  return 0;
}

}  // namespace

void add_trace_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "trace",
      "Trace GPU runtime calls (uprobes on every vendor library found) and host context into a\n"
      "SQLite trace file. Needs root or CAP_BPF+CAP_PERFMON. Stops after --duration, on\n"
      "SIGINT/SIGTERM, or when COMMAND (after --) exits; the last batch is always flushed.\n"
      "Examples:\n"
      "  ingero trace --duration 60s\n"
      "  ingero trace --pid 4411 --db /tmp/run.db\n"
      "  ingero trace --db /tmp/run.db -- python3 train.py");
  auto o = std::make_shared<TraceOptions>();
  auto duration = std::make_shared<std::string>();
  auto retain = std::make_shared<std::string>();
  auto full_rows = std::make_shared<std::string>();
  auto max_size = std::make_shared<std::string>();
  auto pids = std::make_shared<std::vector<uint32_t>>();
  cmd->add_option("--pid,-p", *pids, "Trace only this process (repeatable); its children follow");
  cmd->add_option("--duration", *duration,
                  "Stop after this long: 30s, 5m, 1h (default: until Ctrl-C)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return engine::parse_duration_s(s) > 0 ? ""
                                                   : "bad duration '" + s + "' (use 30s, 5m, 1h)";
          },
          "DURATION"));
  cmd->add_option("--db,--out,-o", o->db_path, "Trace file to write (default ~/.ingero/ingero.db)");
  cmd->add_option("--node", o->node, "Node name stamped on every event (default: hostname)");
  cmd->add_option("--backends", o->backends, "Comma-separated backends to enable (default: all)");
  cmd->add_flag("--all", o->trace_all, "With a COMMAND, trace every process, not only the command");
  cmd->add_flag("--quiet,-q", o->quiet, "Print nothing but errors");
  cmd->add_flag("!--no-live", o->live, "No live one-line summary on a TTY");
  cmd->add_option("--ringbuf-mb", o->ringbuf_mb,
                  "Calls ring buffer in MiB (power of two; 0 = 1 MiB per CPU, 8..64); the stack "
                  "and host rings get a quarter of it (2..16 MiB)")
      ->check(CLI::Validator(
          [](std::string& s) {
            unsigned long v = 0;
            try {
              v = std::stoul(s);
            } catch (const std::exception&) {
            }
            return v <= 1024 && (v & (v - 1)) == 0
                       ? ""
                       : "must be 0 (automatic) or a power of two up to 1024, not " + s;
          },
          "POW2"))
      ->capture_default_str();
  cmd->add_option("--flush-ms", o->flush_ms, "Commit interval in milliseconds")
      ->capture_default_str();
  cmd->add_option("--sysfs-root", o->sysfs_root,
                  "Root under which InfiniBand counters (ROOT/class/infiniband) and amdgpu cards "
                  "(ROOT/class/drm) are read (default /sys)");
  cmd->add_option("--device-poll-ms", o->device_poll_ms,
                  "Poll the GPUs' own utilisation, memory, clocks, power, temperature and errors "
                  "(NVML via libnvidia-ml.so.1, amdgpu sysfs), per device and per process, every "
                  "N ms (0: off). Where they cover the steps, explain measures GPU busy instead "
                  "of bounding GPU idle")
      ->check(CLI::Range(0u, 60000u))
      ->capture_default_str();
  cmd->add_flag("--rdma-verbs", o->rdma_verbs,
                "Also trace libibverbs asynchronous events (ibv_get_async_event)");
  cmd->add_option("--prometheus", o->prometheus,
                  "Serve Prometheus metrics at ADDR/metrics while tracing: :9090 and 9090 mean "
                  "127.0.0.1:9090 (loopback); 0.0.0.0:9090 every interface, with a warning (see "
                  "docs/metrics.md)");
  cmd->add_option("--prometheus-web-config", o->prometheus_web_config,
                  "Prometheus web-config file for the metrics endpoint: tls_server_config, "
                  "basic_auth_users (bcrypt), http_server_config.headers (docs/security.md)")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--prometheus-per-process", o->prometheus_per_process,
      "Add pid and comm labels to the GPU API metrics (one series per process: watch cardinality)");
  cmd->add_flag(
      "--stack,!--no-stack", o->stacks,
      "Capture the user call stack of traced calls, with Python frames for CPython 3.10-3.13 "
      "(default on; --no-stack turns it off)");
  cmd->add_option("--stack-samples", o->stack_samples,
                  "Calls per call site (return address + innermost Python frame) that walk "
                  "their stack; later calls of the site walk once per --stack-interval per "
                  "thread and otherwise take the site's stack. Slow (>= 1 ms) and off-CPU calls "
                  "always get their own")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--stack-interval", o->stack_interval_ms,
                  "Milliseconds between stack walks of one thread at known call sites")
      ->check(CLI::Range(1u, 3600000u))
      ->capture_default_str();
  cmd->add_option("--retain", *retain,
                  "Keep only the last DURATION of events, snapshots and counters (24h, 30m): "
                  "older rows are deleted in bounded batches while tracing")
      ->check(CLI::Validator(
          [](std::string& s) {
            return engine::parse_duration_s(s) > 0 ? "" : "expected a duration: 30m, 24h, 7d";
          },
          "DURATION"));
  cmd->add_option("--max-db-size", *max_size,
                  "Keep the trace's data under SIZE (500MiB, 2GiB, 1GB): the oldest events, "
                  "snapshots and counters are deleted in bounded batches while tracing")
      ->check(CLI::Validator(
          [](std::string& s) {
            return parse_size(s) > 0 ? "" : "expected a size: 500MiB, 2GiB, 1GB";
          },
          "SIZE"));
  cmd->add_option("--full-rows", *full_rows,
                  "Every call keeps its own row for this long (default 10m); then launches that "
                  "succeeded, stayed on-CPU and were not slow are folded into runs, with "
                  "per-second summaries of every call kept for the whole trace (docs/schema.md)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return engine::parse_duration_s(s) > 0 ? "" : "expected a duration: 10m, 1h";
          },
          "DURATION"));
  cmd->add_flag("--keep-all", o->keep_all,
                "Keep every call's row for the whole trace (no folding and no archive; for short "
                "investigations)");
  cmd->add_flag("!--no-archive", o->archive,
                "Keep calls and runs as table rows instead of compressed blocks (a few bytes a "
                "call; read back by every ingero command, not by the sqlite3 shell)");
  cmd->add_option("--nice", o->nice,
                  "Run the tracer at this nice value when it is lower than the current one "
                  "(default -10), so it drains the rings ahead of a saturating workload; the "
                  "command keeps the priority ingero started with. 0 or more: leave it")
      ->check(CLI::Range(-20, 19));
  cmd->add_option("--cpu-sample-hz", o->cpu_sample_hz,
                  "On-CPU samples per second of the threads of GPU processes and their workers, "
                  "with stacks (0: off; needs stacks)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  cmd->add_option("--clickhouse", o->clickhouse,
                  "Also ship the trace to ClickHouse while tracing: http://HOST:8123/DB (https:// "
                  "for TLS; user as http://USER@HOST..., password in INGERO_CLICKHOUSE_PASSWORD). "
                  "The trace file is the spool: rows ClickHouse has not stored are retried, and "
                  "what is left at exit ships on the next start or with `ingero ship` (see "
                  "docs/fleet.md)")
      ->check([](const std::string& url) -> std::string {
        auto ep = fleet::parse_endpoint(url, false);
        return ep ? "" : ep.error().message;
      });
  cmd->add_option("command", o->command, "Command to run and trace (after --)")
      ->configurable(false);
  cmd->positionals_at_end(true);
  add_config_option(app, *cmd, config_cli_schema);
  cmd->callback([&ctx, o, duration, retain, full_rows, max_size, pids] {
    o->pids = *pids;
    // --duration and --ringbuf-mb are checked by their validators, on the command line and
    // in a config file alike.
    if (!duration->empty()) o->duration_s = engine::parse_duration_s(*duration);
    if (!retain->empty()) o->retain_s = engine::parse_duration_s(*retain);
    if (!full_rows->empty()) o->full_rows_s = engine::parse_duration_s(*full_rows);
    if (!max_size->empty()) o->max_db_bytes = parse_size(*max_size);
    std::string flags;
    if (!o->pids.empty()) flags += "pid-filter,";
    if (!o->command.empty()) flags += "command,";
    if (!o->backends.empty()) flags += "backends=" + o->backends + ",";
    flags +=
        o->stacks ? "stack,stack-samples=" + std::to_string(o->stack_samples) + "," : "no-stack,";
    if (!flags.empty()) flags.pop_back();
    o->flags = flags;
    if (o->rdma_verbs) {
      flags += std::string(flags.empty() ? "" : ",") + "rdma-verbs";
      o->flags = flags;
      hal::BackendRegistry with_verbs;
      register_builtin_backends(with_verbs, {.rdma_verbs = true});
      ctx.exit_code = run_trace(*o, with_verbs);
      return;
    }
    ctx.exit_code = run_trace(*o, ctx.registry);
  });
}

}  // namespace ingero::app
