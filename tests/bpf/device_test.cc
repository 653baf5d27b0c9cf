// Device truth end to end: a launch-bound loop on the real libcudart (no GPU: every call fails,
// every call is traced) with the stand-in libnvidia-ml.so.1 (tests/fake_vendor/fake_nvml.c)
// found through LD_LIBRARY_PATH, as the tracer finds the real one. NVML says the loop's GPU is
// 9% busy: explain must say so, rank the launch-bound chain HIGH and name the launch line.
// Without NVML the same loop gets the lower-bound wording; NVML refusing nvmlInit (no driver)
// is reported by check and changes nothing else.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "test_paths.h"
#include "tests/support/subprocess.h"
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

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string script(const std::string& text) {
  std::string path = temp_path("nvml.script");
  std::ofstream(path) << text;
  return path;
}

// The tracer's environment: the stand-in first on the loader's path, with its script.
std::vector<std::string> nvml_env(const std::string& script_path,
                                  const std::string& dir = INGERO_FAKE_NVML_DIR) {
  return {"LD_LIBRARY_PATH=" + dir, "FAKE_NVML_SCRIPT=" + script_path};
}

// The device tables in a file: the writer creates them with the first device row.
int64_t device_tables(const std::string& db) {
  return query_int(db,
                   "SELECT count(*) FROM sqlite_master WHERE name IN ('device_samples', "
                   "'device_events')");
}

struct Traced {
  std::map<std::string, std::string> lines;
  std::string db, err;
  nlohmann::json explain;
  std::string text;
};

Traced trace_loop(const std::vector<std::string>& env) {
  Traced t;
  t.db = temp_path("launchloop.db");
  auto run = trace_command(t.db, {"chrt", "-f", "20", INGERO_STEP_FAULTS, "launchloop", "150"},
                           {"--device-poll-ms", "20"}, env);
  EXPECT_EQ(run.rc, 0) << run.err;
  t.err = run.err;
  t.lines = keyed(run.out);
  EXPECT_EQ(t.lines["steps"], "150") << run.out;
  std::string out, err;
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", t.db, "--json"}, &out, &err), 0) << err;
  t.explain = nlohmann::json::parse(out);
  EXPECT_EQ(run_command({INGERO_BIN, "explain", "--db", t.db}, &t.text, &err), 0) << err;
  return t;
}

#define REQUIRE_LOOP()                \
  do {                                \
    REQUIRE_BPF();                    \
    REQUIRE_FILE(INGERO_STEP_FAULTS); \
    REQUIRE_FILE("/usr/bin/chrt");    \
  } while (0)

const nlohmann::json* chain_of(const nlohmann::json& chains, const std::string& rule) {
  for (const auto& c : chains)
    if (c["rule"] == rule) return &c;
  return nullptr;
}

TEST(DeviceTruth, LaunchBoundLoopMeasuredNinePercentBusyIsHighAndNamesItsLine) {
  REQUIRE_LOOP();
  auto t = trace_loop(nvml_env(
      script("device uuid=GPU-fake-0 name=Fake_H100 gpu=9 mem=3 used=1000000 total=80000000000 "
             "sm_clock=1980 mem_clock=2619 power=250000 temp=41\n"
             "proc device=0 comm=step_faults sm=9 mem=1\n")));
  const std::string pid = t.lines["pid"];
  // The samples are in the trace file: the device every 20 ms, the loop's own.
  EXPECT_GE(query_int(t.db, "SELECT count(*) FROM device_samples WHERE pid IS NULL"), 10);
  EXPECT_GE(query_int(t.db, "SELECT count(*) FROM device_samples WHERE pid = " + pid), 5);
  EXPECT_EQ(query_int(t.db, "SELECT count(*) FROM device_samples WHERE pid = " + pid +
                                " AND sm_util != 9"),
            0);
  EXPECT_EQ(query_int(t.db,
                      "SELECT count(*) FROM device_samples WHERE throttle_reasons IS NOT "
                      "NULL OR ecc_uncorrected IS NOT NULL"),
            0);  // the stand-in lacks those functions: absent, not zero
  const auto& chains = t.explain["chains"];
  // Without a GPU every call of the real runtime fails: that comes first (failed_calls), and
  // the loop's finding right after it.
  ASSERT_GE(chains.size(), 2u) << t.text;
  EXPECT_EQ(chains[0]["rule"], "failed_calls") << chains[0].dump(2);
  const auto& c = chains[1];
  EXPECT_EQ(c["rule"], "launch_bound") << c.dump(2);
  EXPECT_EQ(c["severity"], "HIGH") << c["summary"];
  std::string summary = c["summary"];
  EXPECT_TRUE(has(summary, "GPU busy 9% (NVML)")) << summary;
  EXPECT_TRUE(has(summary, "from tiny_kernels (step_faults.c:" + t.lines["launchloop_line"] + ")"))
      << summary;
  EXPECT_TRUE(has(t.text, "GPU busy 9% (NVML)")) << t.text;
  EXPECT_FALSE(has(t.text, "GPU idle 0%")) << t.text;
  // The report's step timeline carries the lane: every steady step measured at 9%.
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "report", "--db", t.db, "--json", "-o", "-"}, &out, &err), 0)
      << err;
  auto model = nlohmann::json::parse(out);
  ASSERT_EQ(model["steps"].size(), 1u);
  const auto& busy = model["steps"][0]["points"]["gpu_busy"];
  const auto& warm = model["steps"][0]["points"]["warmup"];
  size_t measured = 0;
  for (size_t i = 0; i < busy.size(); ++i) {
    if (busy[i].is_null()) continue;
    ++measured;
    EXPECT_NEAR(busy[i].get<double>(), 0.09, 1e-9) << i;
  }
  EXPECT_GE(measured + 5, busy.size() - std::count(warm.begin(), warm.end(), 1)) << busy.dump();
}

TEST(DeviceTruth, SameLoopWithoutNvmlSaysItsIdleIsALowerBound) {
  REQUIRE_LOOP();
  std::string empty = temp_path("no-nvml");
  std::filesystem::create_directories(empty);
  auto t = trace_loop({"LD_LIBRARY_PATH=" + empty});
  EXPECT_EQ(device_tables(t.db), 0);  // no device row: the file has no device tables
  EXPECT_TRUE(has(t.text, "(no device data: lower bound)")) << t.text;
  EXPECT_FALSE(has(t.text, "GPU idle 0%")) << t.text;
  EXPECT_FALSE(has(t.text, "GPU busy")) << t.text;
  const auto* c = chain_of(t.explain["chains"], "launch_bound");
  ASSERT_NE(c, nullptr) << t.text;
  EXPECT_NE((*c)["severity"], "HIGH");
  EXPECT_TRUE(
      has((*c)["summary"], "from tiny_kernels (step_faults.c:" + t.lines["launchloop_line"] + ")"))
      << (*c)["summary"];
}

// security.md: `ingero trace --device-poll-ms 0` loads nothing. The stand-in NVML first on the
// loader's path dies in nvmlInit_v2: polled at 100 ms, the tracer names the crash; at 0 nothing
// is said of NVML or GPU busy, and the file has no device tables.
TEST(DeviceTruth, DevicePollZeroLoadsNoLibrary) {
  REQUIRE_BPF();
  std::string crash = script("init crash\n");
  for (const char* ms : {"100", "0"}) {
    SCOPED_TRACE(ms);
    std::string db = temp_path(std::string("poll-") + ms + ".db");
    auto run = trace_command(db, {"sleep", "0.3"}, {"--no-stack", "--device-poll-ms", ms},
                             nvml_env(crash));
    EXPECT_EQ(run.rc, 0) << run.err;
    const bool crashed = has(run.err, "libnvidia-ml.so.1 crashed inside nvmlInit_v2 (SIGSEGV");
    EXPECT_EQ(crashed, std::string(ms) != "0") << run.err;
    if (std::string(ms) == "0") {
      EXPECT_FALSE(has(run.err, "nvml")) << run.err;
      EXPECT_FALSE(has(run.err, "GPU busy")) << run.err;
      EXPECT_EQ(device_tables(db), 0);
    }
  }
}

TEST(DeviceTruth, RefusedNvmlInitIsReportedByCheckAndCostsNothingElse) {
  REQUIRE_LOOP();
  auto env = nvml_env(script("init 9\ndevice gpu=9\n"));
  std::string out, err;
  run_command({INGERO_BIN, "check", "--json"}, &out, &err, env);
  auto j = nlohmann::json::parse(out);
  const nlohmann::json* nvml = nullptr;
  for (const auto& item : j["checks"]) {
    if (item["name"] == "nvml") nvml = &item;
    // No probes, so no library audit line saying a vendor runtime is missing.
    EXPECT_NE(item["name"], "backend:nvml");
    EXPECT_NE(item["name"], "backend:amdgpu");
  }
  ASSERT_NE(nvml, nullptr) << out;
  EXPECT_EQ((*nvml)["status"], "optional");
  EXPECT_EQ((*nvml)["value"], "unavailable");
  EXPECT_TRUE(has((*nvml)["detail"], "nvmlInit_v2 failed: Driver Not Loaded (NVML error 9)"))
      << (*nvml)["detail"];
  // The trace runs as without NVML: no rows, one line saying why, the lower bound.
  auto t = trace_loop(env);
  EXPECT_EQ(device_tables(t.db), 0);
  size_t mentions = 0;
  for (size_t at = 0; (at = t.err.find("nvmlInit_v2 failed", at)) != std::string::npos; ++at)
    ++mentions;
  EXPECT_EQ(mentions, 1u) << t.err;
  EXPECT_TRUE(has(t.text, "(no device data: lower bound)")) << t.text;
}

// A driver library that crashes inside nvmlInit_v2 takes down its own process (NVML runs in one,
// hal/sampler_process.h), not `check` or the trace: both say which library and where, and go
// on; one that never answers holds neither.
TEST(DeviceTruth, ACrashingOrHungNvmlIsNamedAndHoldsNothing) {
  REQUIRE_LOOP();
  no_core_dumps();
  std::string out, err;
  auto crash = nvml_env(script("init crash\n"));
  run_command({INGERO_BIN, "check", "--json"}, &out, &err, crash);
  auto j = nlohmann::json::parse(out);  // `check` finished, and said it
  const std::string said =
      "libnvidia-ml.so.1 crashed inside nvmlInit_v2 (SIGSEGV; a broken driver library); it ran "
      "in a process of its own: nothing else is affected";
  bool found = false;
  for (const auto& item : j["checks"])
    if (item["name"] == "nvml") {
      found = true;
      EXPECT_EQ(item["value"], "unavailable");
      EXPECT_TRUE(has(item["detail"], said)) << item["detail"];
    }
  EXPECT_TRUE(found) << out;
  auto c = trace_loop(crash);
  EXPECT_EQ(device_tables(c.db), 0);
  EXPECT_TRUE(has(c.err, "GPU busy not measured (nvml: " + said)) << c.err;
  EXPECT_TRUE(has(c.text, "(no device data: lower bound)")) << c.text;

  auto env = nvml_env(script("init hang\ndevice gpu=9\n"));
  env.push_back("INGERO_NVML_INIT_LIMIT_MS=1000");
  out.clear();
  err.clear();
  EXPECT_EQ(run_command({INGERO_BIN, "check", "--json"}, &out, &err, env, std::chrono::seconds(60)),
            0)
      << err;
  EXPECT_TRUE(has(out, "nvmlInit_v2 did not return within 1 s")) << out;
  auto t = trace_loop(env);
  EXPECT_EQ(device_tables(t.db), 0);
  EXPECT_TRUE(has(t.err, "nvmlInit_v2 did not return within 1 s")) << t.err;
  EXPECT_TRUE(has(t.text, "(no device data: lower bound)")) << t.text;
}

// A driver library that crashes, or stops answering, while the trace runs: the device figures
// stop there, one stored event and one line say why, and the trace ends as it would have.
TEST(DeviceTruth, ANvmlThatBreaksWhileTracingStopsItsFiguresNotTheTrace) {
  REQUIRE_LOOP();
  no_core_dumps();
  const std::string device = "device uuid=GPU-fake-0 gpu=9 mem=3\n";
  const std::string lost =
      "SELECT count(*) FROM device_events WHERE kind = 'sampler_lost' AND source = 'nvml' AND ";
  const std::string after =
      "SELECT count(*) FROM device_samples WHERE timestamp > (SELECT timestamp FROM "
      "device_events WHERE kind = 'sampler_lost')";
  auto c = trace_loop(nvml_env(script(device + "poll crash after_ms=300\n")));
  EXPECT_EQ(query_int(c.db, lost + "code = 11"), 1);
  EXPECT_GT(query_int(c.db, "SELECT count(*) FROM device_samples WHERE sm_util = 9"), 0);
  EXPECT_EQ(query_int(c.db, after), 0);
  EXPECT_TRUE(has(c.err,
                  "ingero: nvml: libnvidia-ml.so.1 crashed (SIGSEGV) during a poll: no device "
                  "figures from here on (it ran in a process of its own: the trace goes on)\n"))
      << c.err;

  auto env = nvml_env(script(device + "poll hang after_ms=300\n"));
  env.push_back("INGERO_NVML_POLL_LIMIT_MS=500");
  auto h = trace_loop(env);
  EXPECT_EQ(query_int(h.db, lost + "code = 0"), 1);
  EXPECT_EQ(query_int(h.db, after), 0);
  // Found silent while the loop ran (its usual length: ~2 s), or, on a host that runs the loop
  // in under a second, by the session end's poll going unanswered: one or the other, said once.
  bool silent = has(h.err,
                    "ingero: nvml: libnvidia-ml.so.1 sent no figures for 520 ms (a GPU or driver "
                    "that no longer answers); its sampler process was stopped: no device figures");
  bool unanswered =
      has(h.err,
          "ingero: nvml: libnvidia-ml.so.1 did not answer a poll within 500 ms (a GPU or driver "
          "that no longer answers); its sampler process was stopped: no device figures");
  EXPECT_NE(silent, unanswered) << h.err;
}

// The tracer killed outright (SIGKILL: nothing of it runs): NVML's process reads its socket's
// end and exits by itself, rather than polling a driver for nobody.
TEST(DeviceTruth, NvmlsProcessEndsWhenTheTracerIsKilled) {
  REQUIRE_LOOP();
  std::string db = temp_path("killed.db");
  auto t = Subprocess::spawn({INGERO_BIN, "trace", "--db", db, "--", "sleep", "30"},
                             nvml_env(script("device gpu=9\n")));
  ASSERT_TRUE(t.wait_stderr_line("device sampling every", std::chrono::seconds(30))) << t.err();
  auto nvml = children_named(t.pid(), "ingero-nvml");
  ASSERT_EQ(nvml.size(), 1u);
  std::vector<pid_t> command;  // released once the probes are on
  for (int i = 0; i < 500 && command.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    command = children_named(t.pid(), "sleep");
  }
  ASSERT_EQ(command.size(), 1u);
  t.signal(SIGKILL);
  kill(command[0], SIGKILL);  // the traced command outlives its tracer, by design
  EXPECT_EQ(t.wait(), 128 + SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!process_ended(nvml[0]) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(process_ended(nvml[0]));
}

// An Xid during the loop, with every NVML function present: a device event in the file, and a
// device_error chain in explain.
TEST(DeviceTruth, XidFromTheEventSetIsStoredAndExplained) {
  REQUIRE_LOOP();
  auto t = trace_loop(nvml_env(script("device uuid=GPU-fake-0 gpu=9 mem=3 ecc_unc=0 ecc_cor=0\n"
                                      "proc device=0 comm=step_faults sm=9 mem=1\n"
                                      "xid device=0 code=79 after_ms=300\n"),
                               INGERO_FAKE_NVML_FULL_DIR));
  EXPECT_EQ(query_int(t.db,
                      "SELECT count(*) FROM device_events WHERE kind = 'xid' AND code = 79 "
                      "AND uuid = 'GPU-fake-0'"),
            1);
  const auto* c = chain_of(t.explain["chains"], "device_error");
  ASSERT_NE(c, nullptr) << t.text;
  EXPECT_TRUE(
      has((*c)["summary"], "GPU 0 (GPU-fake-0) reported Xid 79 (GPU has fallen off the bus)"))
      << (*c)["summary"];
}

}  // namespace
}  // namespace ingero::test
