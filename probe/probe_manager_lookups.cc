// The kernel-name look-up probes at rest and back (probe/probe_manager.h: rest_lookups,
// wake_lookups). The policy that decides when is the tracer's (capture/lookup_rest.h).
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
    for (const auto& lk : a.lookups) out.emplace_back(lk.site.probe_id, lk.resting);
  return out;
}

Result<size_t> ProbeManager::rest_lookups(const std::vector<uint32_t>& probe_ids,
                                          std::function<void(size_t)> gone) {
  if (!session_) return size_t(0);
  std::unordered_set<uint32_t> want(probe_ids.begin(), probe_ids.end());
  std::vector<uint32_t> ids;
  std::vector<Link> links;
  for (AttachedFile& a : attached_files_)
    for (auto& lk : a.lookups) {
      if (lk.resting || !want.count(lk.site.probe_id)) continue;
      // As detach_launches: no call enters through it any more, one in flight still returns;
      // then its links go, and a return still due with them is shipped untimed by BPF at its
      // thread's next call (a look-up without its answer names nothing).
      if (auto st = session_->retire_probes({lk.site.probe_id}, false); !st)
        return make_error(a.display_path + ": " + st.error().message);
      ids.push_back(lk.site.probe_id);
      for (Link& l : lk.links) links.push_back(std::move(l));
      lk.links.clear();
      lk.resting = true;
      attached_ -= std::min<size_t>(attached_, 1);
      if (LibraryStatus* st = status_of(a.display_path); st && st->probes_attached)
        --st->probes_attached;
    }
  size_t total = ids.size();
  if (links.empty()) return total;
  BpfSession* session = session_;
  closer_.close(std::move(links), [session, ids = std::move(ids), gone, total] {
    if (auto st = session->retire_probes(ids, true); !st)
      std::fprintf(stderr, "ingero: warning: kernel look-ups: %s\n", st.error().message.c_str());
    if (gone) gone(total);
  });
  return total;
}

Result<size_t> ProbeManager::wake_lookups() {
  if (!session_) return size_t(0);
  // Their old links are closed and their recipes retired first: attaching again rewrites each
  // recipe live, under the same id (records already read still decode by it).
  closer_.wait();
  size_t back = 0;
  std::string failed;
  for (AttachedFile& a : attached_files_)
    for (auto& lk : a.lookups) {
      if (!lk.resting) continue;
      auto res = session_->attach_calls(a.path, {lk.site});
      if (!res.failed.empty()) {
        // It stays at rest (its recipe retired): said, and tried again at the next wake.
        if (failed.empty()) failed = a.display_path + ": " + res.failed.front().second;
        continue;
      }
      lk.links = std::move(res.links);
      lk.resting = false;
      ++back;
      ++attached_;
      if (LibraryStatus* st = status_of(a.display_path)) ++st->probes_attached;
    }
  if (!failed.empty()) return make_error("attaching a kernel look-up again: " + failed);
  return back;
}

}  // namespace ingero::hal
