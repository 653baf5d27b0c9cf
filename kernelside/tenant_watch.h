// A sink of the capture seam that names the cgroups the events name, as they first appear: a
// call's or host event's own cgroup (with its pid), and the cgroup of the task that preempted
// it (sched_switch's peer). Each is resolved once (kernelside/tenant_names.h) on the thread
// that hands out the events, and handed to `on_settled` when its path is known (the tracer
// stores it in cgroup_metadata). Per event it compares the ids with the last two it saw; a
// cgroup seen before costs a hash lookup.
#pragma once

#include <functional>
#include <unordered_set>

#include "hal/event_sink.h"
#include "kernelside/tenant_names.h"

namespace ingero::kernelside {

class TenantWatch final : public hal::EventSink {
 public:
  using SettledFn = std::function<void(const CgroupTenant&)>;
  TenantWatch(TenantResolver& resolver, SettledFn on_settled)
      : r_(resolver), on_settled_(std::move(on_settled)) {}
  Status on_event(const hal::Event& ev) override;

 private:
  void see(uint64_t cgroup_id, uint32_t pid);
  TenantResolver& r_;
  SettledFn on_settled_;
  uint64_t last_[2] = {};
  std::unordered_set<uint64_t> settled_;
};

}  // namespace ingero::kernelside
