// Which processes a trace filtered by pid reads and lets in: the maps the scans read, and the
// given processes' children that already run when the tracer attaches.
#include <signal.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "app/trace_session.h"
#include "capture/stack_collector.h"
#include "probe/process_tree.h"

namespace ingero::app::trace_detail {

namespace {

// "7, 8, 9": the first 8 pids, then "...".
std::string pid_list(const std::vector<int>& pids) {
  std::string list;
  for (size_t i = 0; i < pids.size() && i < 8; ++i)
    list += (i ? ", " : "") + std::to_string(pids[i]);
  if (pids.size() > 8) list += ", ...";
  return list;
}

}  // namespace

std::vector<int> Trace::scanned_pids() const {
  return session_->config().pids.empty() ? local_.pids() : session_->filtered_pids();
}

void Trace::say_descendants_left() const {
  if (opts_.quiet || !cmd_.started() || !cmd_.done() || session_->config().pids.empty()) return;
  // The processes --pid named, and theirs, are no processes the command started (the line
  // named a `sleep` given with --pid, and told the user to trace it with --pid).
  std::set<int> given(opts_.pids.begin(), opts_.pids.end());
  if (!given.empty()) {
    std::vector<int> roots(given.begin(), given.end());
    for (int pid : hal::descendants_of(local_, roots)) given.insert(pid);
  }
  std::vector<int> left;
  for (int pid : session_->filtered_pids()) {
    if (pid == cmd_.pid() || given.count(pid) || kill(pid, 0) != 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');  // "PID (comm) S ...": a zombie has ended
    if (close == std::string::npos || line.compare(close + 1, 3, " Z ") == 0) continue;
    left.push_back(pid);
  }
  if (left.empty()) return;
  std::string list = pid_list(left);
  bool one = left.size() == 1;
  std::cerr << cr() << "ingero: " << left.size() << (one ? " process" : " processes")
            << " the command started " << (one ? "still runs" : "still run") << " (pid"
            << (one ? " " : "s ") << list
            << "), untraced from here on: trace a command that waits for them, or trace them with "
               "--pid\n";
}

void Trace::add_running_children() {
  if (opts_.pids.empty() || !session_->config().follow_children) return;
  std::vector<int> roots(opts_.pids.begin(), opts_.pids.end());
  std::vector<int> added;
  for (int pid : hal::descendants_of(local_, roots)) {
    if (auto st = session_->add_pid(uint32_t(pid)); !st) {
      std::cerr << cr() << "ingero: warning: " << st.error().message << "\n";
      continue;
    }
    added.push_back(pid);
  }
  if (added.empty()) return;
  if (stacks_) stacks_->scan_existing(added);
  if (opts_.quiet) return;
  std::string list = pid_list(added);
  bool one = added.size() == 1;
  std::cerr << cr() << "ingero: " << added.size() << (one ? " child" : " children")
            << " of the given process" << (roots.size() == 1 ? "" : "es")
            << (one ? " already runs" : " already run") << ", traced too (pid" << (one ? " " : "s ")
            << list << ")\n";
}

}  // namespace ingero::app::trace_detail
