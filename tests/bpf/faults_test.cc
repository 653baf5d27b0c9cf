// The canonical training-loop faults, planted in a C loop on the real CUDA runtime (no GPU:
// every call fails, every call is traced) and traced by ingero: explain must name each cause
// and the line it comes from (tests/workloads/step_faults.c prints its lines).
//
// The loops run at SCHED_FIFO (chrt) so other load on the machine cannot preempt them: what
// explain finds is what was planted. The contention test instead runs the loop next to a CPU
// hog, both at nice -20 on one core.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

std::map<std::string, std::string> keyed(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string k, v;
    if (ls >> k >> v) m[k] = v;
  }
  return m;
}

nlohmann::json explain(const std::string& db) {
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  return nlohmann::json::parse(out);
}

bool has(const nlohmann::json& s, const std::string& part) {
  return s.get<std::string>().find(part) != std::string::npos;
}

// "function (step_faults.c:N)", as the step rules name a location.
std::string at(const std::string& function, const std::string& line) {
  return function + " (step_faults.c:" + line + ")";
}

bool stack_names(const nlohmann::json& chain, const std::string& function,
                 const std::string& line) {
  for (const auto& st : chain["stacks"])
    if (!st["frames"].empty() && has(st["frames"][0], function + " at ") &&
        has(st["frames"][0], "step_faults.c:" + line))
      return true;
  return false;
}

struct Planted {
  std::map<std::string, std::string> lines;
  nlohmann::json chains;
  // For a failure: the tracer's stderr and explain's text report (steps, sites, every chain).
  std::string report;
};

Planted plant(const std::string& mode, int steps, const std::vector<std::string>& extra = {},
              const std::vector<std::string>& flags = {}) {
  std::string db = temp_path(mode + ".db");
  std::vector<std::string> cmd = {
      "chrt", "-f", "20", INGERO_STEP_FAULTS, mode, std::to_string(steps)};
  cmd.insert(cmd.end(), extra.begin(), extra.end());
  auto run = trace_command(db, cmd, flags);
  EXPECT_EQ(run.rc, 0) << run.err;
  Planted p{keyed(run.out), nlohmann::json::array(), ""};
  EXPECT_EQ(p.lines["steps"], std::to_string(steps)) << run.out;
  p.chains = explain(db)["chains"];
  std::string text, err;
  run_command({INGERO_BIN, "explain", "--db", db, "--all-chains"}, &text, &err);
  p.report = run.err + "\n" + text;
  return p;
}

// The first finding of a planted run here: without a GPU every call of the real runtime fails
// (cudaErrorInsufficientDriver), which comes first (failed_calls, HIGH); the planted fault is
// the first chain after it.
const nlohmann::json& planted_first(const Planted& p) {
  // A chain of every field the tests read, for a run that found too few: its checks fail.
  static const nlohmann::json none = {{"rule", "(none)"},
                                      {"severity", ""},
                                      {"summary", ""},
                                      {"stacks", nlohmann::json::array()},
                                      {"fixes", nlohmann::json::array({""})}};
  if (p.chains.empty()) return none;
  EXPECT_EQ(p.chains[0].value("rule", ""), "failed_calls") << p.chains[0].dump(2);
  EXPECT_TRUE(has(p.chains[0]["summary"], "could not use a GPU")) << p.chains[0]["summary"];
  return p.chains.size() > 1 ? p.chains[1] : none;
}

#define REQUIRE_PLANTED()             \
  do {                                \
    REQUIRE_BPF();                    \
    REQUIRE_FILE(INGERO_STEP_FAULTS); \
    REQUIRE_FILE("/usr/bin/chrt");    \
  } while (0)

// The default trace samples on-CPU stacks: the gap is located at the decode loop itself (the
// samples land in libc's clock_gettime; the engine names the program's own frame). With
// sampling off, the gap is located by the call that ends it: the upload.
TEST(Faults, DataLoaderBusyLoopIsStarvationInTheDecodeLoop) {
  REQUIRE_PLANTED();
  auto p = plant("loader", 30);
  SCOPED_TRACE(p.report);
  ASSERT_FALSE(p.chains.empty());
  const auto& c = planted_first(p);
  EXPECT_EQ(c["rule"], "data_loader_starvation") << c.dump(2);
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_TRUE(has(c["summary"], "on-CPU in " + at("next_batch", p.lines["decode_line"])))
      << c["summary"];
  EXPECT_TRUE(stack_names(c, "next_batch", p.lines["upload_line"])) << c["stacks"].dump(2);
  EXPECT_TRUE(has(c["fixes"][0], "forked none")) << c["fixes"];
}

TEST(Faults, DataLoaderBusyLoopWithoutSamplesIsLocatedBeforeTheUpload) {
  REQUIRE_PLANTED();
  auto p = plant("loader", 30, {}, {"--cpu-sample-hz", "0"});
  SCOPED_TRACE(p.report);
  ASSERT_FALSE(p.chains.empty());
  const auto& c = planted_first(p);
  EXPECT_EQ(c["rule"], "data_loader_starvation") << c.dump(2);
  EXPECT_TRUE(has(c["summary"], "on-CPU before " + at("next_batch", p.lines["upload_line"])))
      << c["summary"];
  EXPECT_TRUE(stack_names(c, "next_batch", p.lines["upload_line"])) << c["stacks"].dump(2);
  EXPECT_TRUE(has(c["fixes"][0], "forked none")) << c["fixes"];
}

TEST(Faults, PerRowSyncIsHiddenSyncAtTheRow) {
  REQUIRE_PLANTED();
  auto p = plant("rowsync", 30);
  SCOPED_TRACE(p.report);
  ASSERT_FALSE(p.chains.empty());
  const auto& c = planted_first(p);
  EXPECT_EQ(c["rule"], "hidden_sync") << c.dump(2);
  EXPECT_TRUE(has(c["summary"],
                  "32 blocking round trips per step at " + at("mask_rows", p.lines["row_line"])))
      << c["summary"];
  EXPECT_TRUE(stack_names(c, "mask_rows", p.lines["row_line"])) << c["stacks"].dump(2);
  // The same finding is not reported again as host-bound gaps or per-caller syncs.
  for (const auto& x : p.chains) {
    EXPECT_NE(x["rule"], "host_bound") << x["summary"];
    EXPECT_NE(x["rule"], "repeated_sync") << x["summary"];
  }
}

TEST(Faults, CheckpointWriteAndFsyncIsBlockingIo) {
  REQUIRE_PLANTED();
  std::string dir = temp_path("ckpt-dir");
  std::filesystem::create_directories(dir);
  auto p = plant("ckpt", 20, {dir});
  SCOPED_TRACE(p.report);
  ASSERT_FALSE(p.chains.empty());
  const auto& c = planted_first(p);
  EXPECT_EQ(c["rule"], "blocking_io") << c.dump(2);
  EXPECT_TRUE(has(c["summary"], "after " + at("save_checkpoint", p.lines["ckpt_line"])))
      << c["summary"];
  EXPECT_TRUE(stack_names(c, "save_checkpoint", p.lines["ckpt_line"])) << c["stacks"].dump(2);
  EXPECT_TRUE(has(c["fixes"][0], "asynchronous checkpointing")) << c["fixes"];
  for (const auto& x : p.chains) EXPECT_NE(x["rule"], "host_bound") << x["summary"];
}

TEST(Faults, FreeAndMallocEveryStepIsAllocatorChurn) {
  REQUIRE_PLANTED();
  auto p = plant("churn", 30);
  SCOPED_TRACE(p.report);
  ASSERT_FALSE(p.chains.empty());
  const auto& c = planted_first(p);
  EXPECT_EQ(c["rule"], "allocator_churn") << c.dump(2);
  EXPECT_TRUE(has(c["summary"], "4 frees per step at " + at("reset_buffers", p.lines["free_line"]) +
                                    "; 4 allocations at " +
                                    at("reset_buffers", p.lines["malloc_line"])))
      << c["summary"];
  EXPECT_TRUE(stack_names(c, "reset_buffers", p.lines["free_line"])) << c["stacks"].dump(2);
  EXPECT_TRUE(stack_names(c, "reset_buffers", p.lines["malloc_line"])) << c["stacks"].dump(2);
}

TEST(Faults, CpuHogOnTheSameCoreIsCpuContentionInTheSteps) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_STEP_FAULTS);
  std::string db = temp_path("hog.db");
  std::string script = std::string("nice -n -20 ") + INGERO_CPU_HOG +
                       " 1 8 & sleep 0.3; nice -n -20 taskset -c 1 " + INGERO_STEP_FAULTS +
                       " launches 60; wait";
  auto run = trace_command_on_cpu0(db, {"/bin/sh", "-c", script});
  ASSERT_EQ(run.rc, 0) << run.err;
  auto k = keyed(run.out);
  ASSERT_FALSE(k["hog"].empty()) << run.out;
  auto chains = explain(db)["chains"];
  const nlohmann::json* c = nullptr;
  for (const auto& x : chains)
    if (x["id"].get<std::string>().rfind("cpu_contention:steps:", 0) == 0) c = &x;
  ASSERT_NE(c, nullptr) << chains.dump(2);
  EXPECT_NE((*c)["severity"], "LOW") << (*c)["summary"];
  EXPECT_EQ((*c)["pids"], nlohmann::json::array({std::stoi(k["pid"])}));
  // The hog is among those that took the CPU (other load on this machine may be too), and the
  // stacks show where the loop lost it.
  EXPECT_TRUE(has((*c)["explanation"], "noisy_neighbor (pid " + k["hog"] + ")"))
      << (*c)["explanation"];
  bool launch_line = false;
  for (const auto& st : (*c)["stacks"])
    launch_line |= !st["frames"].empty() && has(st["frames"][0], "launch at ") &&
                   has(st["frames"][0], "step_faults.c:");
  EXPECT_TRUE(launch_line) << (*c)["stacks"].dump(2);
}

}  // namespace
}  // namespace ingero::test
