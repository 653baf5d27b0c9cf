#include "app/trace_flags.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "app/builtin_backends.h"
#include "app/byte_size.h"
#include "app/window_flags.h"
#include "engine/window_spec.h"
#include "fleet/clickhouse_endpoint.h"
#include "hal/utf8.h"
#include "serve/http/listen_address.h"
#include "serve/otlp/config.h"

namespace ingero::app::trace_flags {

constexpr double kCenturyS = 100 * 365.25 * 86400;

CLI::Validator duration_check(const std::string& examples) {
  return CLI::Validator(
      [examples](std::string& s) -> std::string {
        if (s.empty()) return "empty: write a duration with its unit (" + examples + ")";
        if (!std::isalpha(static_cast<unsigned char>(s.back())))
          return "'" + s + "' has no unit: write a duration with its unit (" + examples + ")";
        double v = engine::parse_duration_s(s);
        if (v <= 0) return "bad duration '" + s + "' (use " + examples + ")";
        // Past these, nanoseconds (the session's clock) round to nothing or overflow.
        if (v < 1e-9) return "'" + s + "' is shorter than a nanosecond";
        if (v > kCenturyS) return "'" + s + "' is longer than a century";
        return "";
      },
      "DURATION");
}

namespace {

// A duration flag: "10s", "250ms", "1m" (the validator refuses anything else, a bare number
// among them, or <= 0).
CLI::Option* add_duration(CLI::App& cmd, const std::string& name, std::string& into,
                          const std::string& help) {
  return cmd.add_option(name, into, help)
      ->check(duration_check("500ms, 10s, 1m"))
      ->capture_default_str();
}

void add_otlp_options(CLI::App& cmd, TraceOptions& o, std::string& interval, std::string& threshold,
                      std::string& exit_timeout) {
  cmd.add_option("--otlp", o.otlp,
                 "Also export OTLP/HTTP (protobuf) while tracing to ENDPOINT (http://HOST:4318, "
                 "https:// for TLS; /v1/metrics, /v1/logs and /v1/traces are appended), or "
                 "'env' for OTEL_EXPORTER_OTLP_ENDPOINT: every /metrics series, causal chains as "
                 "log records, and with --otlp-spans slow calls. Headers from "
                 "INGERO_OTLP_HEADERS / OTEL_EXPORTER_OTLP_HEADERS (docs/metrics.md)")
      ->check([](const std::string& v) -> std::string {
        if (v == "env") return "";
        auto c = serve::otlp::resolve_config(v, [](const char*) { return std::nullopt; });
        return c ? "" : c.error().message;
      });
  add_duration(cmd, "--otlp-interval", interval, "With --otlp: export the metrics every this long");
  cmd.add_flag("--otlp-spans", o.otlp_spans,
               "With --otlp: also export calls over --otlp-span-threshold and every collective "
               "as spans, with their stack");
  add_duration(cmd, "--otlp-span-threshold", threshold,
               "With --otlp-spans: a call at least this slow becomes a span");
  cmd.add_option("--otlp-span-rate", o.otlp_span_rate,
                 "With --otlp-spans: at most this many spans per second (the rest are counted, "
                 "not sent)")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  add_duration(cmd, "--otlp-exit-timeout", exit_timeout,
               "At exit, OTLP delivery ends within this long, the request in flight included; "
               "what is left is dropped and counted");
}

}  // namespace

void add_target(CLI::App& cmd, TraceOptions& o, Args& a) {
  cmd.add_option("--pid,-p", a.pids, "Trace only this process (repeatable); its children follow")
      ->check(CLI::Range(1u, 4194304u));  // PID_MAX_LIMIT
  cmd.add_option("--duration", a.duration,
                 "Stop after this long: 30s, 5m, 1h (default: until Ctrl-C)")
      ->check(duration_check("30s, 5m, 1h"));
  cmd.add_option("--db,--out,-o", o.db_path, "Trace file to write (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd.add_option("--older-schema", o.older_schema,
                 "A trace file written by an earlier ingero that kept calls as rows (schema 1 to "
                 "9): refuse it (exit 1, saying how to convert it), or move-aside: rename it "
                 "beside itself (FILE.schemaN-TIME, every command reads it) and trace into a new "
                 "FILE, as the agent's unit and DaemonSet do after an upgrade")
      ->check(CLI::IsMember({"refuse", "move-aside"}))
      ->capture_default_str();
  cmd.add_option("--node", o.node, "Node name stamped on every event (default: hostname)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            bool control = std::any_of(v.begin(), v.end(),
                                       [](unsigned char c) { return c < 0x20 || c == 0x7f; });
            // Not UTF-8 ("\xff\xfe") was stored raw: JSON gave it as U+FFFD, a name no
            // --node could select again.
            return v.empty() || v.size() > 255 || control || !hal::is_utf8(v)
                       ? "a node name is 1 to 255 bytes (UTF-8), none of them control characters"
                       : "";
          },
          "NAME"));
  cmd.add_option("--backends", o.backends, "Comma-separated backends to enable (default: all)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            // Checked with the flags, so that a config file's `backends` names its line.
            // An empty list (an unset $BACKENDS) was read as no flag: every backend.
            if (s.empty()) return std::string(kEmptyBackends);
            hal::BackendRegistry all;
            register_builtin_backends(all, kAllOptInsOn);
            auto chosen = all.select(s);
            return chosen ? "" : chosen.error().message;
          },
          "NAMES"));
  cmd.add_flag("--all", o.trace_all, "With a COMMAND, trace every process, not only the command");
  cmd.add_flag("--quiet,-q", o.quiet, "Print nothing but errors");
  cmd.add_flag("!--no-live", o.live, "No live one-line summary on a TTY");
}

void add_calls(CLI::App& cmd, TraceOptions& o, Args& a) {
  (void)a;
  cmd.add_flag("--kernel-names,!--no-kernel-names", o.kernel_names,
               "Name the kernels launches run, from the runtime's registration of kernels, "
               "driver look-ups and ELF symbols: once per kernel, never on the launch path "
               "(default on; --no-kernel-names attaches no name probe)");
  cmd.add_flag(
      "--stack,!--no-stack", o.stacks,
      "Capture the user call stack of traced calls, with Python frames for CPython 3.10-3.13 "
      "(default on; --no-stack turns it off)");
  cmd.add_option("--stack-samples", o.stack_samples,
                 "Calls per call site (return address + innermost Python frame) that walk "
                 "their stack; later calls of the site walk once per --stack-interval per "
                 "thread and otherwise take the site's stack. Slow (>= 1 ms) and off-CPU calls "
                 "always get their own")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd.add_option("--launch-timing", o.launch_timing,
                 "Time one kernel launch in N per thread (through its return); the others "
                 "cost one uprobe trap, are counted exactly with their arguments and stacks, "
                 "and have no duration (status 'untimed'). 1: time every launch (two traps "
                 "each; three for a runtime launch that reaches the driver, whose runtime "
                 "probes then stay, four without uprobe sessions). Without uprobe sessions (Linux "
                 "< 6.12): launches are timed for 1 s in "
                 "every N s instead (at most one per 4 us per thread), and from the attach to 1 s "
                 "after a library's first launch")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd.add_flag("--keep-runtime-probes", o.keep_runtime_probes,
               "Keep a CUDA runtime's launch probes. By default they are detached once 2,000 "
               "launches of it in a row were seen to reach the driver's launch, whose probe "
               "then names them: one trap a launch instead of two (a launch the runtime "
               "refuses before reaching the driver is then not seen)");
  cmd.add_flag("--keep-lookup-probes", o.keep_lookup_probes,
               "Keep the kernel-name look-up probes (cuKernelGetFunction, cuLibraryGetKernel, "
               "...) attached. By default a look-up that named nothing new in 2,000 calls in a "
               "row rests (cuDNN asks before each of its launches: up to three traps a launch "
               "more); a kernel launched without a name attaches them again");
  cmd.add_option("--stack-interval", o.stack_interval_ms,
                 "Milliseconds between stack walks of one thread at known call sites")
      ->check(CLI::Range(1u, 3600000u))
      ->capture_default_str();
  cmd.add_option("--cpu-sample-hz", o.cpu_sample_hz,
                 "On-CPU samples per second of the threads of GPU processes and their workers, "
                 "with stacks (0: off; needs stacks)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
}

void add_host(CLI::App& cmd, TraceOptions& o, Args& a) {
  cmd.add_option("--ringbuf-mb", o.ringbuf_mb,
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
  cmd.add_option("--flush-ms", o.flush_ms, "Commit interval in milliseconds (1..60000)")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  cmd.add_option("--sysfs-root", o.sysfs_root,
                 "Root under which InfiniBand counters (ROOT/class/infiniband) and amdgpu cards "
                 "(ROOT/class/drm) are read (default /sys)")
      ->check(CLI::ExistingDirectory);
  cmd.add_option("--device-poll-ms", o.device_poll_ms,
                 "Poll the GPUs' own utilisation, memory, clocks, power, temperature and errors "
                 "(NVML via libnvidia-ml.so.1, in a process of its own that a broken driver "
                 "library may crash without the trace; amdgpu sysfs), per device and per "
                 "process, every N ms (0: off). Where they cover the steps, explain measures GPU "
                 "busy instead of bounding GPU idle")
      ->check(CLI::Range(0u, 60000u))
      ->capture_default_str();
  cmd.add_flag("--rdma-verbs", a.rdma_verbs,
               "Also trace libibverbs asynchronous events (ibv_get_async_event)");
  cmd.add_option("--nice", o.nice,
                 "Run the tracer at this nice value when it is lower than the current one "
                 "(default -10), so it drains the rings ahead of a saturating workload; the "
                 "command keeps the priority ingero started with. 0 or more: leave it")
      ->check(CLI::Range(-20, 19));
  cmd.add_option("--inflight-after", a.inflight_after,
                 "Report a traced call still in flight after this long (default 5s), once a "
                 "second while it lasts: the `inflight` table, `ingero status`, "
                 "ingero_inflight_calls; also the thread of a rank outside any GPU call for "
                 "that long. 0s: off")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            // The rules of every duration flag (a unit, at most a century), and zero for off: a
            // bare 0 too, which configs written before those rules hold (zero needs no unit).
            if (s == "0" || engine::parse_duration_s(s) == 0) return "";
            if (auto why = duration_check("5s, 1m")(s); !why.empty()) return why;
            return engine::parse_duration_s(s) >= 1
                       ? ""
                       : "--inflight-after must be 0s (off) or at least 1s";
          },
          "DURATION"))
      ->capture_default_str();
  cmd.add_option("--runtime-state", o.runtime_state,
                 "A container runtime's state root, read (as root, without its socket) for "
                 "container and pod names: containerd's (ROOT/io.containerd.runtime.v2.task/"
                 "k8s.io/ID/config.json), CRI-O's (ROOT/overlay-containers/ID/userdata/"
                 "config.json), Docker's (ROOT/containers/ID/config.v2.json). Repeatable; "
                 "replaces the defaults (/run/containerd, /run/k3s/containerd, /var/snap/microk8s/"
                 "common/run/containerd, /run/containers/storage, /var/lib/containers/storage, "
                 "/var/lib/docker). See docs/schema.md, cgroup_metadata");
  cmd.add_flag("--tenant-names,!--no-tenant-names", o.tenant_names,
               "Name the cgroups of containers and pods (pod, namespace, container) from the "
               "runtime's state, the process's HOSTNAME and its service-account namespace file, "
               "once per cgroup (default on; --no-tenant-names keeps paths and layouts only)");
}

void add_storage(CLI::App& cmd, TraceOptions& o, Args& a) {
  cmd.add_option("--retain", a.retain,
                 "Keep only the last DURATION of events, snapshots and counters (24h, 30m): "
                 "older rows are deleted in bounded batches while tracing")
      ->check(duration_check("30m, 24h, 7d"));
  cmd.add_option("--max-db-size", a.max_size,
                 "Keep the trace's data under SIZE (500MiB, 2GiB, 1GB): the oldest events, "
                 "snapshots and counters are deleted in bounded batches while tracing")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            // An empty trace's tables take ~0.6 MiB: a smaller limit was taken, could never be
            // met and deleted nearly every call trying.
            constexpr uint64_t kLeast = uint64_t(1) << 20;
            uint64_t bytes = parse_size(s);
            if (!bytes) return "expected a size: 500MiB, 2GiB, 1GB";
            if (bytes < kLeast)
              return "'" + s +
                     "' is below 1MiB, the least a trace can be held to (its empty tables take "
                     "~0.6 MiB)";
            return "";
          },
          "SIZE"));
  cmd.add_option("--full-rows", a.full_rows,
                 "Every call keeps its own row for this long (default 10m); then launches that "
                 "succeeded, stayed on-CPU and were not slow are folded into runs, with "
                 "per-second summaries of every call kept for the whole trace (docs/schema.md)")
      ->check(duration_check("10m, 1h"));
  cmd.add_flag("--keep-all", o.keep_all,
               "Keep every call's row for the whole trace (launches are never folded into runs; "
               "for short investigations)");
  // Calls have been kept in blocks from the start since schema 10: accepted so that scripts
  // and config files keep working, and said.
  cmd.add_flag("--no-archive", o.no_archive,
               "Has no effect: calls are kept in compressed blocks from the start; `ingero "
               "export --format sqlite` writes a copy of plain rows for the sqlite3 shell")
      ->group("");
}

void add_export(CLI::App& cmd, TraceOptions& o, Args& a) {
  cmd.add_option("--prometheus", o.prometheus,
                 "Serve Prometheus metrics at ADDR/metrics while tracing: :9090 and 9090 mean "
                 "127.0.0.1:9090 (loopback); 0.0.0.0:9090 every interface, with a warning (see "
                 "docs/metrics.md); '' serves none (over a config file's address)")
      ->check([](const std::string& v) -> std::string {
        if (v.empty()) return "";
        auto a = serve::http::parse_listen_address(v);
        return a ? "" : a.error().message;
      });
  cmd.add_option("--prometheus-web-config", o.prometheus_web_config,
                 "Prometheus web-config file for the metrics endpoint: tls_server_config, "
                 "basic_auth_users (bcrypt), http_server_config.headers (docs/security.md)")
      ->check(CLI::ExistingFile);
  cmd.add_flag(
      "--prometheus-per-process", o.prometheus_per_process,
      "Add pid, comm, namespace, pod and container labels to the GPU API metrics (the last "
      "three where known; one series per process, at most 512: watch cardinality)");
  cmd.add_option("--prometheus-kernels", o.prometheus_kernels,
                 "Launches by kernel name on /metrics: the K kernels with the most launches get "
                 "their own series, the rest share kernel=\"other\" (0: none)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  cmd.add_option("--clickhouse", o.clickhouse,
                 "Also ship the trace to ClickHouse while tracing: http://HOST:8123/DB (https:// "
                 "for TLS; user as http://USER@HOST..., password in INGERO_CLICKHOUSE_PASSWORD). "
                 "The trace file is the spool: rows ClickHouse has not stored are retried, and "
                 "what is left at exit ships on the next start or with `ingero ship` (see "
                 "docs/fleet.md)")
      ->check([](const std::string& url) -> std::string {
        auto ep = fleet::parse_endpoint(url);
        return ep ? "" : ep.error().message;
      });
  cmd.add_option("--clickhouse-exit-timeout", a.ship_exit,
                 "At exit, shipping to ClickHouse ends within this long (default 10s), the "
                 "request in flight and every connect and read included; what is left stays in "
                 "the trace file for the next start or `ingero ship`. A ClickHouse that cannot be "
                 "reached at all twice in a row is not waited for")
      ->check(duration_check("10s, 30s"))
      ->capture_default_str();
  add_otlp_options(cmd, o, a.otlp_interval, a.otlp_threshold, a.otlp_exit);
}

void resolve(const Args& a, TraceOptions& o) {
  // Each once, in the order given (`--pid 5 --pid 5` stored "5,5" as the session's filter).
  for (uint32_t pid : a.pids)
    if (std::find(o.pids.begin(), o.pids.end(), pid) == o.pids.end()) o.pids.push_back(pid);
  // --duration and --ringbuf-mb are checked by their validators, on the command line and in a
  // config file alike.
  if (!a.duration.empty()) o.duration_s = engine::parse_duration_s(a.duration);
  if (!a.retain.empty()) o.retain_s = engine::parse_duration_s(a.retain);
  if (!a.full_rows.empty()) o.full_rows_s = engine::parse_duration_s(a.full_rows);
  if (!a.max_size.empty()) o.max_db_bytes = parse_size(a.max_size);
  o.clickhouse_exit_timeout_s = engine::parse_duration_s(a.ship_exit);
  o.inflight_after_s = a.inflight_after == "0" ? 0 : engine::parse_duration_s(a.inflight_after);
  o.otlp_interval_s = engine::parse_duration_s(a.otlp_interval);
  o.otlp_span_threshold_s = engine::parse_duration_s(a.otlp_threshold);
  o.otlp_exit_timeout_s = engine::parse_duration_s(a.otlp_exit);
}

namespace {

// What `cmd` holds, on its command line or from a config file (an option's count says it was
// given; a default is not).
bool given(const CLI::App& cmd, const char* name) { return cmd.count(name) > 0; }
bool on(const CLI::App& cmd, const char* name) {
  const CLI::Option* o = cmd.get_option_no_throw(name);
  return o && o->count() && o->as<bool>();
}
bool off(const CLI::App& cmd, const char* name) {
  const CLI::Option* o = cmd.get_option_no_throw(name);
  return o && o->count() && !o->as<bool>();
}
bool text(const CLI::App& cmd, const char* name) {
  const CLI::Option* o = cmd.get_option_no_throw(name);
  return o && o->count() && !o->as<std::string>().empty();
}
std::string needs(const char* flag, const char* what, const char* other) {
  return std::string(flag) + " " + what + ": give " + other;
}

}  // namespace

std::optional<std::string> conflict(const CLI::App& cmd, bool with_command) {
  if (on(cmd, "--all") && given(cmd, "--pid"))
    return std::string(
        "--all traces every process and --pid only those it names: give one of "
        "them");
  if (with_command && on(cmd, "--all") && !given(cmd, "command"))
    return std::string(
        "--all traces every process beside a COMMAND, and none is given: "
        "without one every process is traced already (drop --all, or give -- COMMAND)");
  if (on(cmd, "--otlp-spans") && !text(cmd, "--otlp"))
    return std::string("--otlp-spans sends spans to the --otlp endpoint: give --otlp URL");
  for (const char* f : {"--otlp-interval", "--otlp-exit-timeout"})
    if (given(cmd, f) && !text(cmd, "--otlp"))
      return needs(f, "sets how the --otlp export runs", "--otlp URL");
  for (const char* f : {"--otlp-span-threshold", "--otlp-span-rate"})
    if (given(cmd, f) && !on(cmd, "--otlp-spans"))
      return needs(f, "sets which calls --otlp-spans exports", "--otlp-spans (and --otlp URL)");
  if (given(cmd, "--clickhouse-exit-timeout") && !text(cmd, "--clickhouse"))
    return needs("--clickhouse-exit-timeout", "bounds shipping at exit", "--clickhouse URL");
  if (on(cmd, "--keep-all") && given(cmd, "--full-rows"))
    return std::string(
        "--keep-all keeps every call's row for the whole trace, --full-rows for "
        "a time: give one of them");
  if (off(cmd, "--stack") && given(cmd, "--stack-samples"))
    return std::string(
        "--stack-samples sets how calls walk their stacks, and --no-stack walks "
        "none: give one of them");
  if (off(cmd, "--stack") && given(cmd, "--stack-interval"))
    return std::string(
        "--stack-interval sets how often threads walk their stacks, and --no-stack "
        "walks none: give one of them");
  if (off(cmd, "--stack") && given(cmd, "--cpu-sample-hz") &&
      cmd.get_option("--cpu-sample-hz")->as<unsigned>() != 0)
    return std::string(
        "--cpu-sample-hz samples stacks, and --no-stack captures none: give one "
        "of them (--cpu-sample-hz 0 turns sampling off)");
  if (given(cmd, "--prometheus-web-config") && !text(cmd, "--prometheus"))
    return std::string(
        "--prometheus-web-config configures the --prometheus endpoint: give "
        "--prometheus ADDR");
  return std::nullopt;
}

std::optional<std::string> notice(const TraceOptions& o, bool rdma_verbs) {
  if (rdma_verbs || o.backends.empty()) return std::nullopt;
  hal::BackendRegistry all;
  register_builtin_backends(all, {});
  auto chosen = all.select(o.backends);
  if (!chosen) return std::nullopt;  // refused with the flags
  for (const hal::VendorBackend* b : *chosen)
    if (b->name() == "rdma")
      return std::string(
          "--backends names rdma, whose libibverbs calls are traced only with --rdma-verbs: "
          "without it, rdma reads the InfiniBand port counters alone");
  return std::nullopt;
}

std::string session_flags(const TraceOptions& o, bool rdma_verbs) {
  std::string flags;
  if (!o.pids.empty()) flags += "pid-filter,";
  if (!o.command.empty()) flags += "command,";
  if (!o.backends.empty()) flags += "backends=" + o.backends + ",";
  flags += o.stacks ? "stack,stack-samples=" + std::to_string(o.stack_samples) + "," : "no-stack,";
  flags += "launch-timing=" + std::to_string(o.launch_timing) + ",";
  if (o.keep_runtime_probes) flags += "keep-runtime-probes,";
  if (o.keep_lookup_probes) flags += "keep-lookup-probes,";
  if (o.keep_all) flags += "keep-all,";
  if (!o.kernel_names) flags += "no-kernel-names,";
  // The on-CPU sampling rate: what each sample is worth (export --format pprof).
  if (o.stacks && o.cpu_sample_hz)
    flags += "cpu-sample-hz=" + std::to_string(o.cpu_sample_hz) + ",";
  if (!o.otlp.empty()) flags += std::string(o.otlp_spans ? "otlp-spans," : "otlp,");
  // Read back by `ingero status` (store/inflight_rows.h): seconds, 0 when off.
  char b[48];
  std::snprintf(b, sizeof(b), "inflight-after=%g,", o.inflight_after_s);
  flags += b;
  if (rdma_verbs) flags += "rdma-verbs,";
  flags.pop_back();
  return flags;
}

}  // namespace ingero::app::trace_flags
