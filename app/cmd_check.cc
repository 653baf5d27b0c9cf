// `ingero check`: can this host trace, and what would be traced? Every capability is tried,
// not guessed: the BPF object is loaded, the BTF tracepoints attached, and a uprobe is
// placed on a function of this binary and called once.
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "app/check_items.h"
#include "app/commands.h"
#include "app/host_info.h"
#include "hal/bpf_session.h"
#include "hal/elf_symbols.h"
#include "hal/probe_manager.h"

extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_uprobe_selftest_target(
    int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ingero::app {
namespace {

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
}

}  // namespace

CheckReport run_checks(const hal::BackendRegistry& registry,
                       const std::vector<const hal::VendorBackend*>& backends) {
  CheckReport rep;
  HostInfo host = read_host_info();
  rep.add("kernel", CheckStatus::kPass, host.kernel, host.os_release, "");

  struct stat st {};
  if (stat("/sys/kernel/btf/vmlinux", &st) == 0)
    rep.add("btf", CheckStatus::kPass, "/sys/kernel/btf/vmlinux",
            std::to_string(st.st_size / 1024) + " KiB of kernel BTF", "");
  else
    rep.add("btf", CheckStatus::kFail, "missing", "CO-RE programs need kernel BTF",
            "use a kernel built with CONFIG_DEBUG_INFO_BTF=y");

  uint64_t caps = effective_caps();
  bool root = geteuid() == 0;
  bool bpf_cap = caps & (1ull << 39), perfmon = caps & (1ull << 38), sysadmin = caps & (1ull << 21);
  if (root || sysadmin || (bpf_cap && perfmon))
    rep.add("privileges", CheckStatus::kPass, root ? "root" : "CAP_BPF+CAP_PERFMON",
            "may load BPF programs and open perf events", "");
  else
    rep.add("privileges", CheckStatus::kFail, "unprivileged",
            "tracing needs root or CAP_BPF+CAP_PERFMON",
            "run as root, or: setcap cap_bpf,cap_perfmon+ep $(command -v ingero)");

  std::string paranoid = read_small_file("/proc/sys/kernel/perf_event_paranoid");
  rep.add("perf_event_paranoid", CheckStatus::kPass, paranoid.empty() ? "unknown" : paranoid,
          root || perfmon ? "not limiting: privileged" : "unprivileged perf use is limited", "");

  bool pmu = hal::has_uprobe_pmu();
  bool tracefs = read_small_file("/proc/mounts").find(" tracefs ") != std::string::npos;
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

  hal::BpfConfig cfg;
  cfg.ringbuf_bytes = 1u << 16;
  auto session = hal::BpfSession::open(cfg);
  if (!session) {
    rep.add("bpf_load", CheckStatus::kFail, "failed", session.error().message,
            "run `ingero check` as root; see the privileges line");
  } else {
    rep.add("bpf_load", CheckStatus::kPass, "ok", "all BPF programs passed the verifier", "");
    auto core = (*session)->attach_core();
    if (core)
      rep.add("tp_btf", CheckStatus::kPass, "attached",
              "sched_process_exit/exec/fork BTF tracepoints attached", "");
    else
      rep.add("tp_btf", CheckStatus::kFail, "failed", core.error().message,
              "the kernel needs BTF-enabled tracepoints (5.5+)");
    check_uprobe(**session, rep);
  }

  hal::LocalHost hostview;
  hal::ProbeManager pm(nullptr, backends, hostview);
  pm.scan_all();
  for (const auto* b : registry.all()) {
    bool enabled = std::find(backends.begin(), backends.end(), b) != backends.end();
    size_t found = 0;
    for (const auto& lib : pm.libraries())
      if (lib.backend == b->name()) ++found;
    rep.add(
        "backend:" + std::string(b->name()),
        !enabled ? CheckStatus::kOptional
        : found  ? CheckStatus::kPass
                 : CheckStatus::kOptional,
        !enabled ? "disabled" : std::to_string(found) + " libraries",
        found ? "libraries found; see below" : "no library of this vendor found on this host",
        found || !enabled ? "" : "install the vendor runtime, or start the workload and re-run");
  }
  rep.libraries = pm.libraries();
  return rep;
}

void add_check_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "check",
      "Audit whether this host can trace: kernel, BTF, privileges, BPF load, BTF tracepoints\n"
      "and a live uprobe are all tried. Lists each backend's library files, versions,\n"
      "build-ids and probe coverage. Exit code 3 when tracing cannot work.");
  auto json = std::make_shared<bool>(false);
  auto backends = std::make_shared<std::string>();
  cmd->add_flag("--json", *json, "Print the report as JSON");
  cmd->add_option("--backends", *backends, "Comma-separated backends to audit (default: all)");
  cmd->callback([&ctx, json, backends] {
    auto sel = ctx.registry.select(*backends);
    if (!sel) {
      std::cerr << "ingero check: " << sel.error().message << "\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    CheckReport rep = run_checks(ctx.registry, *sel);
    if (*json)
      std::cout << check_report_json(rep).dump(2) << "\n";
    else
      print_check_report(std::cout, rep);
    ctx.exit_code = rep.can_trace() ? kExitOk : kExitNoTracing;
  });
}

}  // namespace ingero::app
