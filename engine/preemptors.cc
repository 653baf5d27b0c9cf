#include "engine/preemptors.h"

#include <algorithm>

#include "engine/chain.h"

namespace ingero::engine {
namespace {

// The process's own threads as a preemptor of its GPU thread.
std::string own_threads(const std::string& comm) { return "its own threads (" + comm + ")"; }

}  // namespace

std::vector<Preemptor> rank_preemptors(
    const std::map<std::pair<uint32_t, std::string>, uint64_t>& by, uint32_t own, std::string* text,
    uint64_t* total_ns) {
  std::vector<Preemptor> foreign;
  Preemptor mine;
  uint64_t total = 0;
  for (const auto& [key, ns] : by) {
    total += ns;
    if (key.first == own) {
      mine.pid = own;
      mine.off_ns += ns;
      mine.comm += (mine.comm.empty() ? "" : ", ") + key.second;
      continue;
    }
    Preemptor p;
    p.pid = key.first;
    p.comm = key.second;
    p.off_ns = ns;
    foreign.push_back(p);
  }
  std::sort(foreign.begin(), foreign.end(),
            [](const Preemptor& x, const Preemptor& y) { return x.off_ns > y.off_ns; });
  if (foreign.size() > 3) foreign.resize(3);
  if (mine.off_ns) foreign.push_back(mine);
  text->clear();
  for (const Preemptor& p : foreign)
    *text +=
        (text->empty() ? "" : ", ") +
        (p.pid == own ? own_threads(p.comm) : p.comm + " (pid " + std::to_string(p.pid) + ")") +
        " " + pct(total ? double(p.off_ns) / double(total) : 0);
  if (total_ns) *total_ns = total;
  return foreign;
}

std::string preemptor_name(const Analysis& a, const Preemptor& p, uint32_t own) {
  return p.pid == own ? own_threads(p.comm) : preemptor_label(a, p);
}

std::vector<std::string> preemptor_fixes(const Analysis& a, uint32_t pid,
                                         const std::vector<Preemptor>& ranked,
                                         const std::vector<std::string>& workers) {
  std::vector<std::string> fixes;
  for (const Preemptor& p : ranked) {
    if (p.pid == pid) {
      fixes.push_back(
          "Run fewer CPU threads than the cores it has (torch.set_num_threads, "
          "OMP_NUM_THREADS): " +
          own_threads(p.comm) + " preempt each other");
    } else if (std::find(workers.begin(), workers.end(), p.comm) != workers.end()) {
      fixes.push_back("Give its worker processes (" + p.comm +
                      ") other cores than the training thread, or fewer of them (num_workers "
                      "<= cores - 1)");
    } else if (is_tracer(a, p.pid)) {
      fixes.push_back(tracer_fix(p));
      break;
    } else {
      fixes.push_back("Lower the priority of " + p.comm + " (pid " + std::to_string(p.pid) +
                      "): nice -n 19, or move it to other cores");
      break;  // the largest other process is the one to name
    }
  }
  return fixes;
}

}  // namespace ingero::engine
