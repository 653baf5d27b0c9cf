// The pid filter of a trace of a command or of --pid, from user space: the given processes in,
// which are in now, and whether any is left (a process leaves it when its last thread exits:
// bpf/calls.bpf.c, ingero_thread_exit).
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "ingero.skel.h"
#include "probe/bpf_errors.h"
#include "probe/bpf_session.h"

namespace ingero::hal {

Status BpfSession::add_pid(uint32_t tgid) {
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.pid_filter, &tgid, sizeof(tgid), &one, sizeof(one),
                           BPF_ANY) != 0)
    return bpf_error("adding pid " + std::to_string(tgid) + " to the filter", errno);
  return {};
}

std::vector<int> BpfSession::filtered_pids() const {
  std::vector<int> out;
  if (config_.pids.empty()) return out;
  uint32_t key = 0, next = 0;
  const uint32_t* prev = nullptr;
  while (bpf_map__get_next_key(skel_->maps.pid_filter, prev, &next, sizeof(next)) == 0) {
    out.push_back(int(next));
    key = next;
    prev = &key;
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool BpfSession::no_pid_left() const {
  if (config_.pids.empty()) return false;
  uint32_t first = 0;
  return bpf_map__get_next_key(skel_->maps.pid_filter, nullptr, &first, sizeof(first)) != 0 &&
         errno == ENOENT;
}

}  // namespace ingero::hal
