// Attaches the minimal counting probe(s) to LIB:SYMBOL[,SYMBOL...] and holds them until stdin
// closes.
//   min_probe LIB SYMBOLS entry|pair|session|session-skip
// entry and pair are perf-event uprobes (an entry program; entry + return programs); session is
// one uprobe-session program that runs at entry and return (Linux 6.12+), session-skip the same
// program returning 1 at entry, so no return probe is armed. bench/run_benchmarks.sh compares
// them with ingero's own probes on the same function.
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "hal/elf_symbols.h"
#include "probe/uprobe_multi.h"
#include "probe_cost.skel.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  std::string mode = argv[3];
  auto idx = ingero::hal::SymbolIndex::load(argv[1]);
  if (!idx) return 2;
  std::vector<uint64_t> offsets;
  std::string list = argv[2];
  for (size_t at = 0; at <= list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    auto* s = (*idx)->find_function(list.substr(at, comma - at));
    if (!s) return 2;
    auto off = (*idx)->file_offset(s->value);
    if (!off) return 2;
    offsets.push_back(*off);
    at = comma + 1;
  }
  auto* skel = probe_cost_bpf__open();
  if (!skel) return 3;
  bool session = mode == "session" || mode == "session-skip";
  bpf_program* sess = mode == "session" ? skel->progs.min_session : skel->progs.min_session_skip;
  for (bpf_program* p : {skel->progs.min_session, skel->progs.min_session_skip})
    bpf_program__set_autoload(p, session && p == sess);
  if (session)
    bpf_program__set_expected_attach_type(sess,
                                          bpf_attach_type(ingero::hal::kBpfTraceUprobeSession));
  if (probe_cost_bpf__load(skel)) return 3;
  std::vector<bpf_link*> links;
  int session_fd = -1;
  if (session) {
    auto fd = ingero::hal::link_uprobe_multi(bpf_program__fd(sess), argv[1], offsets, {},
                                             ingero::hal::UprobeMode::kSession);
    if (!fd) {
      std::fprintf(stderr, "%s\n", fd.error().message.c_str());
      return 4;
    }
    session_fd = *fd;
  } else {
    for (uint64_t off : offsets) {
      LIBBPF_OPTS(bpf_uprobe_opts, eo, .retprobe = false);
      links.push_back(
          bpf_program__attach_uprobe_opts(skel->progs.min_entry, -1, argv[1], off, &eo));
      if (mode == "pair") {
        LIBBPF_OPTS(bpf_uprobe_opts, ro, .retprobe = true);
        links.push_back(
            bpf_program__attach_uprobe_opts(skel->progs.min_return, -1, argv[1], off, &ro));
      }
    }
    for (bpf_link* l : links)
      if (!l) return 4;
  }
  std::printf("attached\n");
  std::fflush(stdout);
  char buf[16];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  if (session_fd >= 0) close(session_fd);
  for (bpf_link* l : links) bpf_link__destroy(l);
  probe_cost_bpf__destroy(skel);
  return 0;
}
