// The kernel-name look-up probes at rest and back (probe/probe_manager.h: rest_lookups,
// wake_lookups). The policy that decides when is the tracer's (capture/lookup_rest.h).
#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "probe/probe_manager.h"

namespace ingero::hal {

// The status a file's look-ups are counted in (its driver's or runtime's: a file has one plan
// with kernel-name probes).
LibraryStatus* ProbeManager::status_of(const std::string& display_path) {
  for (LibraryStatus& st : libraries_)
    if (st.path == display_path && st.probes_attached) return &st;
  for (LibraryStatus& st : libraries_)
    if (st.path == display_path) return &st;
  return nullptr;
}

std::vector<std::pair<uint32_t, bool>> ProbeManager::lookup_probes() const {
  std::vector<std::pair<uint32_t, bool>> out;
  for (const AttachedFile& a : attached_files_)
    for (size_t i = 0; i < a.lookup_sites.size(); ++i)
      out.emplace_back(a.lookup_sites[i].probe_id, a.lookup_resting[i]);
  return out;
}

namespace {

// `sites` where `resting` says `want`.
std::vector<CallSite> sites_where(const std::vector<CallSite>& sites,
                                  const std::vector<bool>& resting, bool want) {
  std::vector<CallSite> out;
  for (size_t i = 0; i < sites.size(); ++i)
    if (resting[i] == want) out.push_back(sites[i]);
  return out;
}

}  // namespace

size_t ProbeManager::rest_lookups(const std::vector<uint32_t>& probe_ids,
                                  std::function<void(size_t)> gone) {
  if (!session_) return 0;
  std::unordered_set<uint32_t> want(probe_ids.begin(), probe_ids.end());
  std::vector<uint32_t> ids;
  std::vector<Link> old;
  for (AttachedFile& a : attached_files_) {
    std::vector<bool> resting = a.lookup_resting;
    std::vector<uint32_t> now;
    for (size_t i = 0; i < a.lookup_sites.size(); ++i)
      if (!resting[i] && want.count(a.lookup_sites[i].probe_id)) {
        resting[i] = true;
        now.push_back(a.lookup_sites[i].probe_id);
      }
    if (now.empty()) continue;
    // The file's look-ups that stay go in new links before the old ones close, so that none of
    // their calls goes unseen; one that traps in both meanwhile is counted once (nested at the
    // same stack pointer, bpf/call_paths.h). Where that fails, nothing of this file rests: its
    // look-ups stay attached, as said.
    std::vector<Link> fresh;
    if (auto awake = sites_where(a.lookup_sites, resting, false); !awake.empty()) {
      auto res = session_->attach_calls(a.path, awake);
      if (!res.failed.empty()) {
        closer_.close(std::move(res.links));
        std::fprintf(stderr, "ingero: warning: %s: its kernel look-ups stay attached: %s\n",
                     a.display_path.c_str(), res.failed.front().second.c_str());
        continue;
      }
      fresh = std::move(res.links);
    }
    // No call enters through those resting from now on, one in flight still returns; once the
    // old links are gone, a return still due with them is shipped untimed by BPF at its
    // thread's next call (a look-up without its answer names nothing).
    if (auto st = session_->retire_probes(now, false); !st) {
      closer_.close(std::move(fresh));
      std::fprintf(stderr, "ingero: warning: %s: its kernel look-ups stay attached: %s\n",
                   a.display_path.c_str(), st.error().message.c_str());
      continue;
    }
    for (Link& l : a.lookup_links) old.push_back(std::move(l));
    a.lookup_links = std::move(fresh);
    a.lookup_resting = std::move(resting);
    ids.insert(ids.end(), now.begin(), now.end());
    attached_ -= std::min(attached_, now.size());
    if (LibraryStatus* st = status_of(a.display_path))
      st->probes_attached -= std::min(st->probes_attached, now.size());
  }
  size_t total = ids.size();
  if (old.empty()) return total;
  BpfSession* session = session_;
  closer_.close(std::move(old), [session, ids = std::move(ids), gone, total] {
    if (auto st = session->retire_probes(ids, true); !st)
      std::fprintf(stderr, "ingero: warning: kernel look-ups: %s\n", st.error().message.c_str());
    if (gone) gone(total);
  });
  return total;
}

Result<size_t> ProbeManager::wake_lookups() {
  if (!session_) return size_t(0);
  // The old links are closed and the resting recipes retired first: attaching again rewrites
  // each recipe live, under the same id (records already read still decode by it).
  closer_.wait();
  size_t back = 0;
  for (AttachedFile& a : attached_files_) {
    size_t resting = size_t(std::count(a.lookup_resting.begin(), a.lookup_resting.end(), true));
    if (!resting) continue;
    // Every look-up of the file in new links, then the links of those that stayed close (one
    // that traps in both meanwhile is counted once, as above).
    auto res = session_->attach_calls(a.path, a.lookup_sites);
    if (!res.failed.empty()) {
      closer_.close(std::move(res.links));
      return make_error("attaching a kernel look-up again: " + a.display_path + ": " +
                        res.failed.front().second);
    }
    closer_.close(std::move(a.lookup_links));
    a.lookup_links = std::move(res.links);
    a.lookup_resting.assign(a.lookup_sites.size(), false);
    back += resting;
    attached_ += resting;
    if (LibraryStatus* st = status_of(a.display_path)) st->probes_attached += resting;
  }
  return back;
}

}  // namespace ingero::hal
