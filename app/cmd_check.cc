// `ingero check`: can this host trace, and what would be traced? Capabilities are tried,
// not guessed: the BPF object is loaded, every BTF tracepoint attached, and a uprobe is
// placed on a function of this binary and called once.
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/builtin_backends.h"
#include "app/check_bench.h"
#include "app/check_config.h"
#include "app/check_items.h"
#include "app/check_otlp.h"
#include "app/commands.h"
#include "app/terminal_text.h"
#include "app/trace_flags.h"
#include "app/window_flags.h"
#include "capture/host_info.h"
#include "engine/json_text.h"
#include "hal/elf_symbols.h"
#include "kernelside/host_programs.h"
#include "probe/bpf_errors.h"
#include "probe/bpf_session.h"
#include "probe/probe_manager.h"

extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_uprobe_selftest_target(
    int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ingero::app {
namespace {

using capture::read_host_info;
using capture::read_small_file;

std::string opt_in_flag(std::string_view backend) {
  for (const auto& o : kOptInBackends)
    if (o.backend == backend) return std::string(o.flag);
  return "";
}

CheckStatus check_status(hal::CheckLine::Status s) {
  switch (s) {
    case hal::CheckLine::Status::kPass:
      return CheckStatus::kPass;
    case hal::CheckLine::Status::kOptional:
      return CheckStatus::kOptional;
    case hal::CheckLine::Status::kFail:
      return CheckStatus::kFail;
  }
  return CheckStatus::kFail;
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

void check_uprobe(hal::BpfSession& session, CheckReport& rep) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    rep.add("uprobes", CheckStatus::kFail, "", "cannot resolve /proc/self/exe", "");
    return;
  }
  exe[n] = 0;
  auto idx = hal::SymbolIndex::load(exe);
  const hal::ElfSymbol* sym =
      idx ? (*idx)->find_function("ingero_uprobe_selftest_target") : nullptr;
  auto off = sym ? (*idx)->file_offset(sym->value) : std::nullopt;
  if (!off) {
    rep.add("uprobes", CheckStatus::kFail, "", "self-test symbol not found in " + std::string(exe),
            "rebuild ingero without stripping its symbols");
    return;
  }
  auto link = session.attach_selftest(exe, *off);
  if (!link) {
    rep.add("uprobes", CheckStatus::kFail, "", link.error().message,
            "the kernel needs CONFIG_UPROBE_EVENTS=y");
    return;
  }
  uint64_t before = session.stats()[INGERO_STAT_SELFTEST];
  volatile int v = ingero_uprobe_selftest_target(41);
  (void)v;
  uint64_t hits = session.stats()[INGERO_STAT_SELFTEST] - before;
  if (hits == 1)
    rep.add("uprobes", CheckStatus::kPass, "fired", "a uprobe on this binary fired exactly once",
            "");
  else
    rep.add("uprobes", CheckStatus::kFail, std::to_string(hits) + " hits",
            "a uprobe attached but did not fire as expected", "check kernel uprobe support");
  rep.add("uprobe_multi", session.uses_uprobe_multi() ? CheckStatus::kPass : CheckStatus::kOptional,
          session.uses_uprobe_multi() ? "supported" : "not supported",
          session.uses_uprobe_multi()
              ? "one link per library; attach/detach in one kernel operation"
              : "one perf-event uprobe per function and direction: this kernel frees them one at "
                "a time at a session's end, in a process of its own (ingero-detach)",
          session.uses_uprobe_multi() ? "" : "Linux 6.6+ attaches faster");
}

// The privileges line and perf_event_paranoid's, from the process's effective capabilities
// and user namespace (under the fake root `r` in tests).
void privilege_checks(const std::string& r, CheckReport& rep) {
  uint64_t caps = hal::effective_caps(r + "/proc/self/status").value_or(0);
  bool root = r.empty() ? geteuid() == 0 : caps == 0x1ffffffffffULL || caps == 0x3ffffffffffULL;
  // Root of a user namespace (a rootless container, `unshare -U -r`) holds its capabilities
  // there only: it passed as "root", and the refused load was then blamed on the kernel.
  const bool userns = hal::in_user_namespace(r + "/proc/self/uid_map");
  if (userns) root = false, caps = 0;
  bool perfmon = caps & (1ull << 38), sysadmin = caps & (1ull << 21);
  if (userns)
    rep.add("privileges", CheckStatus::kFail, "user namespace",
            "root or capabilities inside a user namespace count there only: the kernel loads "
            "no tracing program for them",
            "run ingero on the host, or in a container in the host's user namespace with "
            "CAP_BPF+CAP_PERFMON");
  else if (root || hal::can_load_tracing(caps))
    rep.add("privileges", CheckStatus::kPass,
            root       ? "root"
            : sysadmin ? "CAP_SYS_ADMIN"
                       : "CAP_BPF+CAP_PERFMON",
            "may load BPF programs and open perf events", "");
  else
    rep.add("privileges", CheckStatus::kFail, "unprivileged",
            "tracing needs root or CAP_BPF+CAP_PERFMON",
            "run as root, or: setcap cap_bpf,cap_perfmon+ep $(command -v ingero)");

  std::string paranoid = read_small_file(r + "/proc/sys/kernel/perf_event_paranoid");
  bool privileged = root || perfmon || sysadmin;
  rep.add("perf_event_paranoid", paranoid.empty() ? CheckStatus::kOptional : CheckStatus::kPass,
          paranoid.empty() ? "unknown" : paranoid,
          privileged ? "not limiting: ingero runs privileged"
                     : "limits unprivileged perf events (uprobes need CAP_PERFMON regardless)",
          "");
}

}  // namespace

void host_checks(const CheckInputs& in, CheckReport& rep) {
  const std::string& r = in.root;
  utsname u{};
  std::string release = read_small_file(r + "/proc/sys/kernel/osrelease");
  if (release.empty() && r.empty() && uname(&u) == 0) release = u.release;
  rep.add("kernel", release.empty() ? CheckStatus::kFail : CheckStatus::kPass,
          release.empty() ? "unknown" : release, read_host_info().os_release, "");

  struct stat st {};
  if (stat((r + "/sys/kernel/btf/vmlinux").c_str(), &st) == 0)
    rep.add("btf", CheckStatus::kPass, "/sys/kernel/btf/vmlinux",
            std::to_string(st.st_size / 1024) + " KiB of kernel BTF", "");
  else
    rep.add("btf", CheckStatus::kFail, "missing", "CO-RE programs need kernel BTF",
            "use a kernel built with CONFIG_DEBUG_INFO_BTF=y");

  privilege_checks(r, rep);

  bool pmu = exists(r + "/sys/bus/event_source/devices/uprobe/type");
  bool tracefs = read_small_file(r + "/proc/mounts").find(" tracefs ") != std::string::npos;
  rep.add("uprobe_pmu", pmu ? CheckStatus::kPass : CheckStatus::kOptional,
          pmu ? "present" : "missing",
          pmu ? "uprobes attach through perf_event_open without tracefs"
              : "uprobes fall back to tracefs",
          pmu ? "" : "ingero trace mounts tracefs itself when needed");
  rep.add(
      "tracefs", tracefs ? CheckStatus::kPass : CheckStatus::kOptional,
      tracefs ? "mounted" : "not mounted",
      pmu ? "not needed: BTF tracepoints and the uprobe PMU are used" : "needed for uprobes",
      tracefs
          ? ""
          : "mount -t tracefs tracefs /sys/kernel/tracing (ingero trace does this when needed)");

  tenant_checks(in, rep);  // cgroup_v2, tenant_names

  std::string ptrace = read_small_file(r + "/proc/sys/kernel/yama/ptrace_scope");
  rep.add("ptrace_scope", ptrace == "3" ? CheckStatus::kOptional : CheckStatus::kPass,
          ptrace.empty() ? "no Yama" : ptrace,
          ptrace == "3"
              ? "no process may read another's memory: Python stack frames cannot be walked"
              : "root may read traced processes' memory (Python stacks)",
          ptrace == "3" ? "set kernel.yama.ptrace_scope <= 2 for Python frames" : "");

  std::string nv = read_small_file(r + "/proc/driver/nvidia/version");
  rep.add("nvidia_driver", nv.empty() ? CheckStatus::kOptional : CheckStatus::kPass,
          nv.empty() ? "absent" : nv.substr(0, nv.find('\n')),
          nv.empty() ? "no NVIDIA kernel driver: CUDA calls fail, but they are still traced"
                     : "CUDA calls reach a GPU",
          "");
  bool kfd = exists(r + "/dev/kfd"), kfd_sys = exists(r + "/sys/class/kfd");
  rep.add("amd_kfd", kfd && kfd_sys ? CheckStatus::kPass : CheckStatus::kOptional,
          std::string("/dev/kfd ") + (kfd ? "present" : "absent") + ", /sys/class/kfd " +
              (kfd_sys ? "present" : "absent"),
          kfd && kfd_sys ? "ROCm's kernel driver (KFD) is loaded"
                         : "no AMD KFD: HIP calls fail, but they are still traced",
          "");
  // Each backend's side channel (InfiniBand/RoCE ports, ...), as the backend judges it.
  for (const hal::VendorBackend* b : in.backends)
    for (auto& l : b->check(r.empty() ? "/sys" : r + "/sys"))
      rep.add(std::move(l.name), check_status(l.status), std::move(l.value), std::move(l.detail),
              std::move(l.fix));
}

CheckReport run_checks(const hal::BackendRegistry& registry,
                       const std::vector<const hal::VendorBackend*>& backends) {
  CheckReport rep;
  // The side channels (nvml, amdgpu, InfiniBand) of the backends asked for: `--backends cuda`
  // started NVML too, 25 s against a driver library that hangs.
  host_checks(CheckInputs{"", backends}, rep);
  hal::BpfConfig cfg;
  cfg.rings = {1u << 16, 1u << 16, 1u << 16};
  cfg.stacks = true;  // every program the trace defaults load passes the verifier
  cfg.cpu_samples = true;
  auto session = hal::BpfSession::open(cfg);
  if (!session) {
    // Refused though ingero had the privileges (its verifier, or a security policy): the
    // message names the program and why (hal::load_error), and privileges are no fix.
    bool refused = hal::may_load_bpf();
    rep.add("bpf_load", CheckStatus::kFail, "failed", session.error().message,
            refused ? "this kernel refuses a program ingero needs: please report it with `uname "
                      "-r` and the reason above"
                    : "run `ingero check` as root; see the privileges line");
  } else {
    rep.add("bpf_load", CheckStatus::kPass, "ok", "all BPF programs passed the verifier", "");
    hal::CallAttach mode = (*session)->call_attach();
    rep.add("call_probes",
            mode == hal::CallAttach::kSession ? CheckStatus::kPass : CheckStatus::kOptional,
            hal::call_attach_name(mode),
            mode == hal::CallAttach::kSession
                ? "a nested call (cudaLaunchKernel -> cuLaunchKernel) arms no return probe"
                : "a launch costs one trap, two in its timing windows (1 s in every "
                  "--launch-timing seconds, 32 by default, while its return probe is attached), "
                  "and other nested calls pay a return probe too",
            mode == hal::CallAttach::kSession ? "" : "Linux 6.12+ has uprobe sessions");
    bool lookups = (*session)->inflight_by_lookup();
    rep.add("inflight_reader", lookups ? CheckStatus::kOptional : CheckStatus::kPass,
            lookups ? "thread-table look-ups" : "map-element iterator",
            lookups ? "this kernel refused to load the map-element iterator (EPERM): calls in "
                      "flight (hangs, `ingero status`, the in-flight gauges) are read by looking "
                      "each traced thread up, a copy of its whole state each"
                    : "calls in flight (hangs, `ingero status`, the in-flight gauges) are read by "
                      "an iterator over the thread table",
            lookups ? "a kernel whose BPF policy lets root load iter/bpf_map_elem programs" : "");
    kernelside::HostPrograms host(**session);
    // The call side and the host context attach to some tracepoints alike (process exit, fork,
    // exec): one line each, failed if either failed.
    auto tps = (*session)->attach_core();
    for (auto& t : host.attach()) {
      auto same = std::find_if(tps.begin(), tps.end(), [&](auto& x) { return x.first == t.first; });
      if (same == tps.end())
        tps.push_back(std::move(t));
      else if (!t.second)
        same->second = t.second;
    }
    for (auto& [tp, st] : tps) {
      // Lifecycle tracepoints are required (exec re-scan, unfinished calls); the rest only
      // remove host context.
      bool required = tp.rfind("sched_process", 0) == 0 || tp == "sched_switch";
      rep.add("tp_btf:" + tp,
              st         ? CheckStatus::kPass
              : required ? CheckStatus::kFail
                         : CheckStatus::kOptional,
              st ? "attached" : "failed", st ? "BTF tracepoint attached" : st.error().message,
              st ? "" : "the kernel needs this tracepoint with BTF (Linux 5.5+)");
    }
    check_uprobe(**session, rep);
  }
  hal::LocalHost hostview;
  hal::ProbeManager pm(nullptr, backends, hostview);
  pm.scan_all();
  for (const auto* b : registry.all()) {
    // A backend without probes (a device side channel: nvml, amdgpu) has its own check line.
    if (b->tables().empty()) continue;
    bool enabled = std::find(backends.begin(), backends.end(), b) != backends.end();
    size_t found = 0, resolved = 0, total = 0;
    for (const auto& lib : pm.libraries())
      if (lib.backend == b->name()) {
        ++found;
        resolved += lib.specs_resolved;
        total += lib.specs_total;
      }
    std::string opt_in = opt_in_flag(b->name());
    std::string value = !enabled ? "disabled" : std::to_string(found) + " libraries";
    std::string detail = !enabled ? "not among --backends"
                         : found  ? std::to_string(resolved) + "/" + std::to_string(total) +
                                       " probes resolved; see below"
                                 : "no library of this vendor found on this host";
    if (enabled && !opt_in.empty()) {
      value += ", opt-in";
      detail += "; traced only with `ingero trace " + opt_in + "`";
    }
    rep.add(
        "backend:" + std::string(b->name()),
        enabled && found ? CheckStatus::kPass : CheckStatus::kOptional, value, detail,
        found || !enabled ? "" : "install the vendor runtime, or start the workload and re-run");
  }
  rep.libraries = pm.libraries();
  for (const auto& o : kOptInBackends) rep.opt_in[std::string(o.backend)] = std::string(o.flag);
  return rep;
}

void add_check_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "check",
      "Audit whether this host can trace. Tried, not guessed: kernel and BTF, privileges,\n"
      "perf_event_paranoid, uprobe PMU and tracefs, cgroup v2, ptrace_scope, loading the BPF\n"
      "object, each BTF tracepoint, and a live uprobe. Reports the NVIDIA driver, AMD KFD and\n"
      "InfiniBand devices, then per backend the library files (path, soname, version,\n"
      "build-id, processes mapping them) and probe coverage. Exit code 3 when tracing\n"
      "cannot work.");
  auto json = std::make_shared<bool>(false);
  auto backends = std::make_shared<std::string>();
  auto config = std::make_shared<std::string>();
  auto bench = std::make_shared<bool>(false);
  auto otlp = std::make_shared<std::string>();
  auto db = std::make_shared<std::string>();
  cmd->add_flag("--json", *json, "Print the report as JSON");
  cmd->add_option("--backends", *backends, "Comma-separated backends to audit (default: all)")
      ->check(CLI::Validator(
          [](std::string& s) { return s.empty() ? std::string(trace_flags::kEmptyBackends) : ""; },
          "NAMES"));
  cmd->add_option("--config", *config,
                  "Only validate this config file (e.g. /etc/ingero/ingero.toml): every unknown "
                  "key and bad value, with its line. Exit 0 valid, 1 not")
      ->type_name("FILE")
      ->check(path_given());  // "" (an unset $CFG) ran the whole host check and passed
  cmd->add_flag("--bench", *bench,
                "Also measure for ~2 s what a traced call costs on this kernel (a private "
                "function: untraced, a minimal uprobe pair, ingero's probes with and without "
                "stacks) and predict the overhead at 10k/50k/200k calls/s. Needs root");
  cmd->add_option("--otlp", *otlp,
                  "Also try this OTLP endpoint as `trace --otlp` would (an empty metrics export, "
                  "with INGERO_OTLP_HEADERS / OTEL_EXPORTER_OTLP_* applied); 'env' reads "
                  "OTEL_EXPORTER_OTLP_ENDPOINT")
      ->type_name("ENDPOINT");
  cmd->add_option("--db", *db,
                  "Trace file whose last OTLP-exporting session's delivery is reported (default "
                  "~/.ingero/ingero.db, when it exists)")
      ->type_name("FILE")
      ->check(path_given());
  cmd->callback([&ctx, json, backends, config, bench, otlp, db] {
    if (!config->empty()) {
      ctx.exit_code = run_config_check(*config, *json, std::cout);
      return;
    }
    // Opt-in backends are audited too: their libraries, versions and coverage are listed
    // and marked with the flag that turns them on.
    hal::BackendRegistry audit;
    register_builtin_backends(audit, kAllOptInsOn);
    auto sel = audit.select(*backends);
    if (!sel) {
      std::cerr << "ingero check: " << sel.error().message << "\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    CheckReport rep = run_checks(audit, *sel);
    if (!otlp->empty()) check_otlp_endpoint(*otlp, rep);
    check_otlp_delivery(db->empty() ? default_db_path() : *db, !db->empty(), rep);
    ctx.exit_code = rep.can_trace() ? kExitOk : kExitNoTracing;
    nlohmann::json j = check_report_json(rep);
    if (!*json) {
      TerminalText text(std::cout);  // library paths and device names are anyone's bytes
      print_check_report(text, rep);
    }
    if (*bench && !rep.can_trace()) {
      // Said, not skipped in silence: the exit status (3) alone would not tell a script that
      // asked for the figures that there are none.
      const char* why = "not run: this host cannot trace (the checks above say why)";
      std::cerr << "ingero check --bench: " << why << "\n";
      j["probe_cost"] = {{"not_run", why}};
    } else if (*bench) {
      auto cost = measure_probe_cost(2.0);
      if (!cost) {
        std::cerr << "ingero check --bench: " << cost.error().message << "\n";
        ctx.exit_code = kExitFailure;
      } else {
        if (!cost->exact()) ctx.exit_code = kExitFailure;
        j["probe_cost"] = probe_cost_json(*cost);
        if (!*json) {
          std::cout << "\n";
          print_probe_cost(std::cout, *cost);
        }
      }
    }
    if (*json) std::cout << engine::json_text(j, 2) << "\n";
  });
}

}  // namespace ingero::app
