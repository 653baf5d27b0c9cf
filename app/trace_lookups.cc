// Kernel-name look-ups at rest (capture/lookup_rest.h): once a second, the look-up probes that
// named nothing new in their last calls are detached; every tenth of a second, a kernel launched
// without a name since brings them back, as does a process newly mapping a library of theirs (a
// re-scan after its loader's notification): its look-ups may come once each, before its first
// launch.
#include <iostream>
#include <sstream>

#include "app/trace_session.h"

namespace ingero::app::trace_detail {

void Trace::rest_lookups() {
  if (lookup_rest_off_ || !kernels_) return;
  std::vector<uint32_t> ids;
  for (const auto& [id, resting] : probes_->lookup_probes())
    if (!resting) ids.push_back(id);
  if (ids.empty()) return;
  std::vector<uint64_t> held = session_->names_held_back(ids);
  const auto& news = pipeline_->counters().name_news_by_probe;
  std::vector<capture::LookupRest::Seen> seen;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = news.find(ids[i]);
    seen.push_back({ids[i], held[i], it == news.end() ? 0 : it->second});
  }
  std::vector<uint32_t> rest = lookup_rest_.to_rest(seen);
  if (rest.empty()) return;
  std::ostringstream ops;
  uint64_t proof = 0;
  for (uint32_t id : rest) {
    const hal::AttachedProbe* p = probes_->table().find(id);
    ops << (ops.tellp() > 0 ? ", " : "") << (p && p->spec ? p->spec->symbol : "?");
    proof = std::max(proof, lookup_rest_.proof(id));
  }
  size_t n = probes_->rest_lookups(rest);
  lookup_rest_.rested(rest, kernels_->counters().launched_unnamed);
  kernels_->set_lookups_resting(true);
  if (!opts_.quiet)
    std::cerr << cr() << "ingero: kernel look-up probes at rest (" << n
              << ", each named nothing new in " << proof << " calls or more): " << ops.str()
              << "; the launches they came before cost one trap each, and a kernel launched "
                 "without a name attaches them again (--keep-lookup-probes keeps them)\n";
}

void Trace::wake_lookups(bool newcomer) {
  if (lookup_rest_off_ || !kernels_ || !lookup_rest_.resting()) return;
  if (!newcomer && !lookup_rest_.to_wake(kernels_->counters().launched_unnamed)) return;
  auto n = probes_->wake_lookups();
  if (!n) {
    // Those attached again are live; the others stay at rest, and nothing rests from now on.
    lookup_rest_off_ = true;
    std::cerr << cr() << "ingero: " << n.error().message
              << ": a kernel looked up only through it from now on is not named (counted in "
                 "unnamed_launches)\n";
    return;
  }
  lookup_rest_.woke(!newcomer);
  kernels_->set_lookups_resting(false);
  if (!opts_.quiet)
    std::cerr << cr() << "ingero: "
              << (newcomer ? "a process newly mapped a library whose kernel look-ups rest"
                           : "a kernel was launched without a name")
              << ": " << *n << " resting kernel look-up probes are attached again\n";
}

}  // namespace ingero::app::trace_detail
