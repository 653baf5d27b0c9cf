// Attaches the minimal counting probe(s) to LIB:SYMBOL and holds them until stdin closes.
//   min_probe LIB SYMBOL entry|pair
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "hal/elf_symbols.h"
#include "probe_cost.skel.h"

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  auto idx = ingero::hal::SymbolIndex::load(argv[1]);
  if (!idx) return 2;
  auto* s = (*idx)->find_function(argv[2]);
  if (!s) return 2;
  auto off = (*idx)->file_offset(s->value);
  auto* skel = probe_cost_bpf__open_and_load();
  if (!skel) return 3;
  LIBBPF_OPTS(bpf_uprobe_opts, eo, .retprobe = false);
  bpf_link* e = bpf_program__attach_uprobe_opts(skel->progs.min_entry, -1, argv[1], *off, &eo);
  bpf_link* r = nullptr;
  if (std::string(argv[3]) == "pair") {
    LIBBPF_OPTS(bpf_uprobe_opts, ro, .retprobe = true);
    r = bpf_program__attach_uprobe_opts(skel->progs.min_return, -1, argv[1], *off, &ro);
  }
  if (!e || (std::string(argv[3]) == "pair" && !r)) return 4;
  std::printf("attached\n");
  std::fflush(stdout);
  char buf[16];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  bpf_link__destroy(e);
  if (r) bpf_link__destroy(r);
  probe_cost_bpf__destroy(skel);
  return 0;
}
