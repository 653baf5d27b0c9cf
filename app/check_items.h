// The capability audit's data: one line per check, plus the libraries each backend found.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "hal/backend.h"
#include "probe/probe_manager.h"

namespace ingero::app {

enum class CheckStatus { kPass, kOptional, kFail };
std::string_view status_name(CheckStatus s);  // "pass", "optional", "fail"

struct CheckItem {
  std::string name;
  CheckStatus status = CheckStatus::kPass;
  std::string value, detail, fix;
};

struct CheckReport {
  std::vector<CheckItem> items;
  std::vector<hal::LibraryStatus> libraries;
  // Backends trace attaches only on request: backend name -> the trace flag.
  std::map<std::string, std::string> opt_in;
  void add(std::string name, CheckStatus s, std::string value, std::string detail,
           std::string fix) {
    items.push_back({std::move(name), s, std::move(value), std::move(detail), std::move(fix)});
  }
  bool can_trace() const;
  const CheckItem* find(std::string_view name) const;
};

// Where the host checks read from: "" is the real host; tests point it at a fake tree with
// proc/, sys/, dev/ and etc/ under it.
struct CheckInputs {
  std::string root;
  // Backends whose check() lines (hal/side_channel.h) join the report, read under root/sys.
  std::vector<const hal::VendorBackend*> backends;
};

// Checks that only read files: kernel, BTF, privileges, perf_event_paranoid, uprobe PMU,
// tracefs, cgroup v2, ptrace_scope, NVIDIA driver, AMD KFD, then each backend's side channel
// (the rdma backend: InfiniBand devices).
void host_checks(const CheckInputs& in, CheckReport& rep);
// cgroup v2 (unified, or a hybrid host's v2 mount) and, where containers or pods run, what
// naming their cgroups reads and costs (app/check_tenants.cc). Part of host_checks.
void tenant_checks(const CheckInputs& in, CheckReport& rep);
// Everything: host checks, then loading BPF, each BTF tracepoint, a live uprobe, and the
// libraries of each backend.
CheckReport run_checks(const hal::BackendRegistry& registry,
                       const std::vector<const hal::VendorBackend*>& backends);
void print_check_report(std::ostream& out, const CheckReport& rep);
nlohmann::json check_report_json(const CheckReport& rep);
nlohmann::json library_json(const hal::LibraryStatus& lib, const std::string& opt_in_flag = "");

}  // namespace ingero::app
