#include "kernelside/host_programs.h"

#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>

#include "ingero.skel.h"

namespace ingero::kernelside {

std::vector<std::pair<std::string, Status>> HostPrograms::attach() {
  std::vector<std::pair<std::string, Status>> out;
  auto* sk = session_.skeleton();
  struct {
    bpf_program* prog;
    const char* tracepoint;
  } all[] = {{sk->progs.ingero_host_fork, "sched_process_fork"},
             {sk->progs.ingero_host_exec, "sched_process_exec"},
             {sk->progs.ingero_host_exit, "sched_process_exit"},
             {sk->progs.ingero_sched_switch, "sched_switch"},
             {sk->progs.ingero_sched_waking, "sched_waking"},
             {sk->progs.ingero_oom_victim, "mark_victim"},
             {sk->progs.ingero_page_alloc, "mm_page_alloc"},
             {sk->progs.ingero_block_issue, "block_rq_issue"},
             {sk->progs.ingero_block_complete, "block_rq_complete"},
             {sk->progs.ingero_tcp_retransmit, "tcp_retransmit_skb"}};
  for (auto& a : all) {
    bpf_link* l = bpf_program__attach(a.prog);
    if (!l) {
      int err = errno;
      out.push_back({a.tracepoint, Error{std::string("attaching tp_btf/") + a.tracepoint + ": " +
                                             std::strerror(err),
                                         err}});
      continue;
    }
    links_.emplace_back(l);
    out.push_back({a.tracepoint, Status{}});
  }
  return out;
}

}  // namespace ingero::kernelside
