#include "kernelside/tenant_watch.h"

namespace ingero::kernelside {

void TenantWatch::see(uint64_t cgroup_id, uint32_t pid) {
  if (!cgroup_id || cgroup_id == last_[0] || cgroup_id == last_[1]) return;
  if (!settled_.count(cgroup_id)) {
    CgroupTenant t = r_.resolve(cgroup_id, pid);
    if (!r_.settled(cgroup_id)) return;  // tried again with the cgroup's next event
    settled_.insert(cgroup_id);
    if (!t.path.empty() && on_settled_) on_settled_(t);
  }
  last_[1] = last_[0];
  last_[0] = cgroup_id;
}

ingero::Status TenantWatch::on_event(const hal::Event& ev) {
  see(ev.cgroup_id, ev.pid);
  if (ev.kind == hal::EventKind::kSchedSwitch)
    if (uint64_t peer = ev.get_or(hal::Field::kPeerCgroup, 0))
      see(peer, uint32_t(ev.get_or(hal::Field::kPeerPid, 0)));
  return {};
}

}  // namespace ingero::kernelside
