// What `ingero trace` says and records of the libraries it attaches to: at the start, and
// those found later (a process loading one, the periodic scan), attached late for the
// processes that had them mapped already.
#include <algorithm>
#include <iostream>
#include <map>

#include "app/trace_session.h"
#include "capture/stack_collector.h"
#include "engine/chain.h"
#include "probe/probe_manager.h"

namespace ingero::app::trace_detail {

void Trace::print_libraries(const std::vector<hal::LibraryStatus>& libs) {
  if (opts_.quiet) return;
  for (const auto& l : libs) {
    if (l.backend.empty()) {
      std::cerr << "ingero:   skipped " << l.path << ": "
                << (l.errors.empty() ? "unreadable" : l.errors.front()) << "\n";
      continue;
    }
    std::cerr << "ingero:   " << l.probes_attached << " probes on " << l.path << " (" << l.backend
              << "/" << l.api << (l.version.empty() ? "" : " " + l.version)
              << (l.embedded ? ", static copy" : "") << ", " << l.specs_resolved << "/"
              << l.specs_total << " functions)\n";
    for (const auto& e : l.errors) std::cerr << "ingero:     attach failed: " << e << "\n";
  }
}

void Trace::store_libraries(const std::vector<hal::LibraryStatus>& libs, bool with_errors,
                            uint32_t late_pid, int64_t late_ns) {
  for (const auto& l : libs) {
    std::string missing, errors;
    if (with_errors) {
      for (auto& m : l.missing_required) missing += (missing.empty() ? "" : ",") + m;
      for (auto& e : l.errors) errors += (errors.empty() ? "" : "\n") + e;
    }
    store::LibraryRow row{l.backend,
                          l.vendor,
                          l.api,
                          l.path,
                          l.soname,
                          l.version,
                          l.build_id,
                          l.embedded,
                          l.specs_total,
                          l.specs_resolved,
                          l.probes_attached,
                          missing,
                          errors,
                          0,
                          0};
    if (late_pid && l.probes_attached) {
      row.late_pid = late_pid;
      row.late_ns = late_ns;
    }
    (void)writer_->add_library(row);
  }
}

// A library found while a process already has it mapped is attached late for that process:
// the calls it made into it before the attach are not traced. Said here and recorded
// (libraries.late_pid, late_ns), so that explain says it too.
void Trace::rescan_pending() {
  if (rescan_.empty()) return;
  std::map<int, uint64_t> pids;
  pids.swap(rescan_);
  for (const auto& [pid, noticed] : pids) {
    // One read of the process's maps for both (on a host-wide trace, at every exec of the host).
    std::vector<hal::MapEntry> maps;
    auto fresh = probes_->scan_pid(pid, &maps);
    if (stacks_) stacks_->process_changed(uint32_t(pid), std::move(maps));
    if (fresh.empty()) continue;
    int64_t late = std::max<int64_t>(1, mono_now_ns() - int64_t(noticed));
    if (!opts_.quiet)
      std::cerr << cr() << "ingero: new libraries in pid " << pid << ", attached "
                << engine::format_duration(uint64_t(late))
                << " after its loader reported them (calls into them before that are not "
                   "traced):\n";
    print_libraries(fresh);
    store_libraries(fresh, false, uint32_t(pid), late);
  }
  probes_->watch_loaders();
  if (probes_->take_lookup_newcomer()) wake_lookups(true);
}

void Trace::rescan_all() {
  if (stacks_)
    stacks_->forget_gone([this](uint32_t pid) { return pipeline_->gpu_pids().count(pid) > 0; });
  std::vector<int> pids = scanned_pids();
  auto fresh = probes_->scan_all(&pids);
  if (!fresh.empty() && !opts_.quiet)
    std::cerr << cr()
              << "ingero: new libraries found by the periodic scan (calls into them before now "
                 "are not traced):\n";
  print_libraries(fresh);
  for (const auto& l : fresh)
    store_libraries({l}, false, l.pids.empty() ? 0 : uint32_t(*l.pids.begin()), 0);
  probes_->watch_loaders();
  // Not a wake: what this scan finds first is mostly forks of a traced process (DataLoader
  // workers share its image, and look nothing up); an exec or a dlopen is re-scanned at once.
  (void)probes_->take_lookup_newcomer();
}

// What was attached, to how many libraries, and how libraries loaded later are found.
void Trace::print_attached(const std::vector<hal::LibraryStatus>& libs) {
  // Without a loader's link-map probe, a library loaded later (dlopen, a Python import) is
  // found by the next 30 s re-scan at best: its first calls, or a short command's all, go
  // untraced. A refused probe was kept to itself.
  if (probes_->loaders_watched() == 0) {
    std::cerr << "ingero: warning: no dynamic loader is watched ("
              << (probes_->loader_error().empty() ? std::string("none found")
                                                  : probes_->loader_error())
              << "): a library a process loads later (dlopen, a Python import) is found at its "
                 "next exec or within 30 s, and its calls before then are not traced\n";
  }
  std::set<std::string> files;
  for (const auto& l : libs)
    if (l.probes_attached) files.insert(l.path);
  if (!opts_.quiet) {
    std::cerr << "ingero: attached " << probes_->attached_probes() << " probes on " << files.size()
              << " librar" << (files.size() == 1 ? "y" : "ies") << " ("
              << hal::call_attach_name(session_->call_attach()) << ", "
              << probes_->loaders_watched() << " dynamic loader"
              << (probes_->loaders_watched() == 1 ? "" : "s") << " watched for new ones)\n";
    if (const auto& w = probes_->window_plan(); w.period_ns)  // probe/launch_windows.h
      std::cerr << "ingero: without uprobe sessions (Linux 6.12+) a return probe traps at every "
                   "call: launches are timed in windows of "
                << engine::format_duration(uint64_t(w.window_ns)) << " in every "
                << engine::format_duration(uint64_t(w.period_ns))
                << " and until a window after a library's first launch, at one trap outside them\n";
    if (inflight_ && session_->inflight_by_lookup())  // probe/inflight_table.h
      std::cerr << "ingero: this kernel refused the BPF map-element iterator: calls in flight are "
                   "read by looking each traced thread up, a copy of its whole state a second\n";
    print_libraries(libs);
  }
}

}  // namespace ingero::app::trace_detail
