// Most of a session's fixed cost is the kernel's verifier walking ingero's programs as they load:
// 0.21 s (`--no-stack`) and 0.30 s (default) of every `ingero trace`, before the record writer
// or the decoder did anything, when the record assembly and the Python walk were inline at every
// call site. The work is bounded here by the instructions the verifier walked (the same for a
// kernel and an object on every run, unlike its time).
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "probe/bpf_session.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

std::map<std::string, uint64_t> verified_insns(hal::BpfConfig cfg) {
  cfg.rings = {1u << 16, 1u << 16, 1u << 16};
  cfg.verifier_stats = true;
  auto session = hal::BpfSession::open(cfg);
  EXPECT_TRUE(session) << session.error().message;
  std::map<std::string, uint64_t> out;
  if (!session) return out;
  for (const auto& p : (*session)->verification()) out[p.name] = p.insns;
  for (const auto& [name, n] : out) std::cout << "  verified " << name << ": " << n << "\n";
  return out;
}

uint64_t total(const std::map<std::string, uint64_t>& insns) {
  uint64_t n = 0;
  for (const auto& [name, k] : insns) n += k;
  return n;
}

// As `ingero trace` loads them by default: stacks with Python frames, on-CPU samples, the host
// context. Walked before: ingero_call 230,572 instructions, ingero_thread_exit 48,772,
// ingero_cpu_sample 14,444 (this kernel, 6.18); now ~32,600 (launches batched; ~30,000 before
// the name look-ups' checks, global functions walked once; ~31,700 before an entry walk took
// the stack again where the kernel left out the call site), ~6,200 and ~3,300.
TEST(BpfVerifier, TheDefaultSessionsProgramsVerifyInBoundedWork) {
  REQUIRE_BPF();
  hal::BpfConfig cfg;
  cfg.stacks = true;
  cfg.cpu_samples = true;
  cfg.host_context = true;
  cfg.launch_batches = true;
  auto insns = verified_insns(cfg);
  ASSERT_TRUE(insns.count("ingero_call")) << "the session's call program was not loaded";
  for (const char* name : {"ingero_thread_exit", "ingero_cpu_sample", "ingero_sched_switch"})
    ASSERT_TRUE(insns.count(name)) << name << " was not loaded";
  for (const auto& [name, n] : insns) EXPECT_GT(n, 0u) << name << ": no verifier summary";
  EXPECT_LE(insns["ingero_call"], 33'500u);
  EXPECT_LE(insns["ingero_thread_exit"], 10'000u);
  EXPECT_LE(insns["ingero_cpu_sample"], 7'000u);
  EXPECT_LE(total(insns), 50'000u);
}

// `--no-stack`: the call program without the stack walk. Walked before: ingero_call 187,665;
// ~15,500 before launches were batched (bpf/launch_batch.h), whose writer is walked twice since,
// for the batch and for the ring alone: ~23,500 (10 ms against 7 here); 23,758 with the name
// look-ups' checks.
TEST(BpfVerifier, TheNoStackSessionsProgramsVerifyInBoundedWork) {
  REQUIRE_BPF();
  hal::BpfConfig cfg;
  cfg.stacks = false;
  cfg.host_context = true;
  cfg.launch_batches = true;
  auto insns = verified_insns(cfg);
  ASSERT_TRUE(insns.count("ingero_call")) << "the session's call program was not loaded";
  EXPECT_EQ(insns.count("ingero_cpu_sample"), 0u);
  EXPECT_LE(insns["ingero_call"], 26'000u);
  EXPECT_LE(total(insns), 38'000u);
}

}  // namespace
}  // namespace ingero::test
