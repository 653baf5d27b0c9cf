// `ingero check` as a user runs it: every backend's libraries, opt-in ones included, and the
// probe-cost self-measurement (--bench) with exact hit counts. Real libraries, real probes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "bpf/ingero_records.h"
#include "hal/elf_symbols.h"
#include "probe/bpf_session.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

// What the self-test probes in this test: a function of this binary.
extern "C" __attribute__((noinline, used, visibility("default"))) int ingero_test_selftest_target(
    int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}

namespace ingero::test {
namespace {

nlohmann::json check_json(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {INGERO_BIN, "check", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string out;
  int rc = run_command(args, &out);
  EXPECT_EQ(rc, 0) << out;
  return nlohmann::json::parse(out);
}

TEST(CheckAudit, ListsLibibverbsAsOptInWithVersionAndCoverage) {
  REQUIRE_BPF();
  REQUIRE_FILE("/usr/lib/x86_64-linux-gnu/libibverbs.so.1");
  auto j = check_json({"--backends", "rdma"});
  nlohmann::json rdma;
  for (auto& c : j["checks"])
    if (c["name"] == "backend:rdma") rdma = c;
  ASSERT_FALSE(rdma.is_null()) << j.dump(2);
  EXPECT_EQ(rdma["status"], "pass");
  EXPECT_EQ(rdma["value"], "1 libraries, opt-in");
  EXPECT_NE(rdma["detail"].get<std::string>().find("traced only with `ingero trace --rdma-verbs`"),
            std::string::npos);
  ASSERT_EQ(j["libraries"].size(), 1u) << j["libraries"].dump(2);
  const auto& lib = j["libraries"][0];
  EXPECT_EQ(lib["backend"], "rdma");
  EXPECT_EQ(lib["api"], "ibverbs");
  EXPECT_EQ(lib["soname"], "libibverbs.so.1");
  // Debian 12's libibverbs1 is rdma-core 44: libibverbs.so.1.14.44.0.
  EXPECT_EQ(lib["version"].get<std::string>().rfind("1.14.", 0), 0u) << lib["version"];
  EXPECT_EQ(lib["probes_total"], 1);
  EXPECT_EQ(lib["probes_resolved"], 1);
  EXPECT_EQ(lib["opt_in"], "--rdma-verbs");
}

// How calls are probed, and what that costs a launch: one trap with uprobe sessions, and
// without them but in its timing windows; the perf pair's probes are freed after a session by a
// process of its own.
TEST(CheckAudit, SaysWhatALaunchCostsUnderEachWayOfProbing) {
  REQUIRE_BPF();
  struct Want {
    const char* mode;
    const char* value;
    const char* detail;
    const char* multi;
  } wants[] = {
      {"session", "uprobe session",
       "a nested call (cudaLaunchKernel -> cuLaunchKernel) arms no return probe",
       "one link per library; attach/detach in one kernel operation"},
      {"multi", "uprobe_multi pair",
       "a launch costs one trap, two in its timing windows (1 s in every --launch-timing "
       "seconds, 32 by default, while its return probe is attached), and other nested calls pay "
       "a return probe too",
       "one link per library; attach/detach in one kernel operation"},
      {"perf", "perf-event uprobe pair",
       "a launch costs one trap, two in its timing windows (1 s in every --launch-timing "
       "seconds, 32 by default, while its return probe is attached), and other nested calls pay "
       "a return probe too",
       "one perf-event uprobe per function and direction: this kernel frees them one at a time "
       "at a session's end, in a process of its own (ingero-detach)"}};
  for (const Want& w : wants) {
    std::string out;
    ASSERT_EQ(run_command({INGERO_BIN, "check", "--json", "--backends", "nccl"}, &out, nullptr,
                          {std::string("INGERO_CALL_ATTACH=") + w.mode}),
              0)
        << out;
    auto j = nlohmann::json::parse(out);
    std::map<std::string, nlohmann::json> by;
    for (auto& c : j["checks"]) by[c["name"]] = c;
    EXPECT_EQ(by["call_probes"]["value"], w.value) << w.mode;
    EXPECT_EQ(by["call_probes"]["detail"], w.detail) << w.mode;
    EXPECT_EQ(by["uprobe_multi"]["detail"], w.multi) << w.mode;
  }
}

// Where the kernel refuses the map-element iterator (forced here by INGERO_NO_MAP_ITER, as
// Linux 6.18.44 with a BPF LSM policy does), every other program still loads, and check says
// how calls in flight are read instead.
TEST(CheckAudit, SaysHowCallsInFlightAreRead) {
  REQUIRE_BPF();
  std::string out;
  ASSERT_EQ(run_command({INGERO_BIN, "check", "--json", "--backends", "nccl"}, &out, nullptr,
                        {"INGERO_NO_MAP_ITER=1"}),
            0)
      << out;
  auto j = nlohmann::json::parse(out);
  std::map<std::string, nlohmann::json> by;
  for (auto& c : j["checks"]) by[c["name"]] = c;
  EXPECT_EQ(by["bpf_load"]["value"], "ok") << out;
  EXPECT_EQ(by["inflight_reader"]["status"], "optional") << out;
  EXPECT_EQ(by["inflight_reader"]["value"], "thread-table look-ups") << out;
  EXPECT_EQ(by["inflight_reader"]["detail"],
            "this kernel refused to load the map-element iterator (EPERM): calls in flight "
            "(hangs, `ingero status`, the in-flight gauges) are read by looking each traced "
            "thread up, a copy of its whole state each")
      << out;
}

// A CUDA_HOME named `name` (any bytes) holding the real libcudart, for `check` to find.
std::string cuda_home_named(const std::string& name) {
  std::string home = temp_path(name);
  std::filesystem::create_directories(home + "/lib64");
  std::filesystem::copy_file(INGERO_CUDA_ROOT "/lib64/libcudart.so.13",
                             home + "/lib64/libcudart.so.13");
  return home;
}

// A library in a folder whose name is not UTF-8 (Latin-1 "café"): `check --json` is still one
// JSON document, the path's bad byte as U+FFFD. It aborted with nothing on stdout.
TEST(CheckAudit, ALibraryPathThatIsNotUtf8KeepsTheJsonValid) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_ROOT "/lib64/libcudart.so.13");
  std::string home = cuda_home_named("caf\xE9");
  std::string out, err;
  int rc = run_command({INGERO_BIN, "check", "--json", "--backends", "cuda"}, &out, &err,
                       {"CUDA_HOME=" + home});
  EXPECT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out << err;
  std::string shown = temp_path("caf") +
                      "\xEF\xBF\xBD"
                      "/lib64/libcudart.so.13";
  bool found = false;
  for (const auto& lib : j["libraries"]) found |= lib["path"] == shown;
  EXPECT_TRUE(found) << j["libraries"].dump(2);
}

// A HIP runtime only LD_LIBRARY_PATH or a virtualenv's PyTorch wheel leads to: check listed
// none there ("no library of this vendor found") where trace then traced it. Both are looked
// in, as the CUDA backend's wheels are.
TEST(CheckAudit, HipLibrariesOnTheLibraryPathAndInAVirtualenvAreListed) {
  REQUIRE_BPF();
  REQUIRE_FILE("/lib/x86_64-linux-gnu/libamdhip64.so.5");
  const std::string odd = temp_path("rocm-odd"), venv = temp_path("venv");
  const std::string wheel = venv + "/lib/python3.11/site-packages/torch/lib";
  std::filesystem::create_directories(odd);
  std::filesystem::create_directories(wheel);
  std::filesystem::copy_file("/lib/x86_64-linux-gnu/libamdhip64.so.5", odd + "/libamdhip64.so.5");
  std::filesystem::copy_file("/lib/x86_64-linux-gnu/libamdhip64.so.5", wheel + "/libamdhip64.so.5");
  std::string out, err;
  int rc = run_command({INGERO_BIN, "check", "--json", "--backends", "hip"}, &out, &err,
                       {"LD_LIBRARY_PATH=/nonexistent:" + odd, "VIRTUAL_ENV=" + venv});
  EXPECT_EQ(rc, 0) << err;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out << err;
  std::set<std::string> paths;
  for (const auto& lib : j["libraries"]) paths.insert(lib["path"].get<std::string>());
  EXPECT_TRUE(paths.count(odd + "/libamdhip64.so.5")) << j["libraries"].dump(2);
  EXPECT_TRUE(paths.count(wheel + "/libamdhip64.so.5")) << j["libraries"].dump(2);
}

// The same report as text: a folder name with an escape sequence reaches the terminal as text.
TEST(CheckAudit, ALibraryPathWithAnEscapeSequenceIsPrintedAsText) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_ROOT "/lib64/libcudart.so.13");
  std::string home = cuda_home_named("red\x1b[31m");
  std::string out, err;
  EXPECT_EQ(
      run_command({INGERO_BIN, "check", "--backends", "cuda"}, &out, &err, {"CUDA_HOME=" + home}),
      0)
      << err;
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
  EXPECT_NE(out.find("red\\x1b[31m"), std::string::npos) << out;
}

// The uprobe self-test of `ingero check` (and MCP's get_check) probes a function of its own
// binary. Attached for every process, a second process running the same function (another
// check beside it) was counted too, and two self-tests' breakpoints coming and going on one
// address killed a stdio MCP server with SIGTRAP in CI. It is for its own process alone now: a
// child calling the function five times while it is attached counts nothing.
TEST(CheckAudit, TheUprobeSelfTestCountsOnlyItsOwnProcess) {
  REQUIRE_BPF();
  hal::BpfConfig cfg;
  cfg.rings = {1u << 16, 1u << 16, 1u << 16};
  auto session = hal::BpfSession::open(cfg);
  ASSERT_TRUE(session) << session.error().message;
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  exe[n] = 0;
  auto idx = hal::SymbolIndex::load(exe);
  ASSERT_TRUE(idx);
  const hal::ElfSymbol* sym = (*idx)->find_function("ingero_test_selftest_target");
  ASSERT_NE(sym, nullptr);
  auto off = (*idx)->file_offset(sym->value);
  ASSERT_TRUE(off);
  auto link = (*session)->attach_selftest(exe, *off);
  ASSERT_TRUE(link) << link.error().message;
  uint64_t before = (*session)->stats()[INGERO_STAT_SELFTEST];
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (int i = 0; i < 5; ++i) (void)ingero_test_selftest_target(i);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << WTERMSIG(status);
  EXPECT_EQ((*session)->stats()[INGERO_STAT_SELFTEST] - before, 0u);
  volatile int v = ingero_test_selftest_target(41);
  (void)v;
  EXPECT_EQ((*session)->stats()[INGERO_STAT_SELFTEST] - before, 1u);
}

TEST(CheckAudit, BenchCountsEveryProbeHitExactly) {
  REQUIRE_BPF();
  auto j = check_json({"--backends", "cuda", "--bench"});
  ASSERT_TRUE(j.contains("probe_cost")) << j.dump(2);
  const auto& p = j["probe_cost"];
  // Four copies timed in turns of 1000 calls, at least 5 turns: the same count for each.
  uint64_t calls = p["untraced_calls"];
  EXPECT_GE(calls, 5000u);
  EXPECT_EQ(calls % 1000, 0u);
  EXPECT_EQ(p["min_calls"], calls);
  EXPECT_EQ(p["min_entries"], calls);
  EXPECT_EQ(p["min_returns"], calls);
  EXPECT_EQ(p["ingero_calls"], calls);
  EXPECT_EQ(p["ingero_records"], calls);
  EXPECT_EQ(p["stacks_calls"], calls);
  EXPECT_EQ(p["stacks_records"], calls);
  EXPECT_EQ(p["exact"], true);
  // Both attach the same way, so the ratio compares like with like.
  EXPECT_EQ(p["uprobe_multi"], p["min_pair_uprobe_multi"]);
  // A probed call costs more than an unprobed one (a trap per call: microseconds against
  // nanoseconds on any kernel), and the prediction is that cost times the rate.
  EXPECT_GT(p["min_pair_ns"].get<double>(), 10 * p["untraced_ns"].get<double>());
  const auto& pred = p["predicted"];
  ASSERT_EQ(pred.size(), 3u);
  EXPECT_EQ(pred[0]["calls_per_s"], 10000.0);
  double added = p["ingero_ns"].get<double>() - p["untraced_ns"].get<double>();
  EXPECT_DOUBLE_EQ(pred[0]["cpu_share_no_stack"].get<double>(), 10000.0 * added * 1e-9);
  EXPECT_LT(p["seconds"].get<double>(), 10.0);
}

}  // namespace
}  // namespace ingero::test
