// ingero's call program attached, with a spec's recipe, to a function of the test binary itself:
// for tests of what the programs ship, without a vendor library or a child process.
#pragma once

#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/elf_symbols.h"
#include "probe/bpf_session.h"
#include "probe/record_decoder.h"

namespace ingero::test {

// A session with small rings and no stacks, the host programs loaded (not attached) if asked.
inline Result<std::unique_ptr<hal::BpfSession>> open_small_session(bool host_context = false) {
  hal::BpfConfig cfg;
  cfg.rings = {1u << 16, 1u << 16, 1u << 16};
  cfg.stacks = false;
  cfg.host_context = host_context;
  return hal::BpfSession::open(cfg);
}

// A session with stacks on, for tests of call site keys: each site walks its first two calls,
// a thread's sampling clock allows only its first call, and every launch goes at its entry
// (none is timed, so none always walks and each site has one key).
inline Result<std::unique_ptr<hal::BpfSession>> open_site_session() {
  hal::BpfConfig cfg;
  cfg.rings = {1u << 20, 1u << 20, 1u << 20};
  cfg.host_context = false;
  cfg.stacks = true;
  cfg.stack_site_walks = 2;
  cfg.stack_walk_interval_ns = uint64_t(3600) * 1'000'000'000;
  cfg.launch_timing_every = 0;
  return hal::BpfSession::open(cfg);
}

// The links, as probe id 0; empty, with `why` set, when the function or the attach failed.
inline std::vector<hal::Link> attach_to_self(hal::BpfSession& session, const hal::ProbeSpec& spec,
                                             std::string* why) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    *why = "reading /proc/self/exe";
    return {};
  }
  exe[n] = 0;
  auto idx = hal::SymbolIndex::load(exe);
  const hal::ElfSymbol* sym = idx ? (*idx)->find_function(spec.symbol) : nullptr;
  std::optional<uint64_t> off;
  if (sym) off = (*idx)->file_offset(sym->value);
  if (!off) {
    *why = std::string(spec.symbol) + " not found in " + exe;
    return {};
  }
  hal::CallSite site{.file_offset = *off, .probe_id = 0, .recipe = hal::make_recipe(spec)};
  auto att = session.attach_calls(exe, {site});
  if (!att.failed.empty()) {
    *why = att.failed[0].second;
    return {};
  }
  return std::move(att.links);
}

}  // namespace ingero::test
