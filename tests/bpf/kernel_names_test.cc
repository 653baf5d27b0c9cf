// Kernel names end to end (hal/kernel_names.h): real probes on the real libcudart and on the
// driver and HIP stand-ins, a real nvcc-built program with a template kernel in two
// instantiations, a plain kernel and one in a namespace, started after the tracer and before
// it, with and without symbols. Every assertion is an exact outcome: per-kernel launch counts,
// demangled names, where each name came from, and what could not be named.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/bpf/kernels_app_harness.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;
using std::chrono::seconds;

// The workload runs first (its kernels registered), then the tracer attaches to it.
std::string trace_running(const std::string& program, int launches, int* pid, std::string* err) {
  std::string db = temp_path("running.db");
  auto app = Subprocess::spawn({program});
  *pid = pid_of(app, "workload");
  EXPECT_TRUE(app.wait_stdout_line("ready", seconds(30))) << app.err();
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--duration",
                                   "300s", "--pid", std::to_string(*pid)});
  EXPECT_TRUE(tracer.wait_stderr_line("tracing", seconds(60))) << tracer.err();
  app.write_stdin("go\n");
  EXPECT_TRUE(app.wait_stdout_line("launched", seconds(30))) << app.out();
  EXPECT_TRUE(wait_for(db, launches_of(*pid), launches)) << tracer.err();
  app.close_stdin();
  EXPECT_EQ(app.wait(), 0);
  tracer.signal(SIGINT);
  EXPECT_EQ(tracer.wait(), 0) << tracer.err();
  *err = tracer.err();
  return db;
}

Rows kernels_of(const std::string& db, int pid) {
  return query_rows(db,
                    "SELECT coalesce(kernel, 'NULL'), count(*) FROM calls WHERE kind = 'launch' "
                    "AND pid = " +
                        std::to_string(pid) + " GROUP BY 1 ORDER BY 1");
}

Rows names_of(const std::string& db, int pid) {
  return query_rows(db, "SELECT name, raw_name, source FROM kernel_names WHERE pid = " +
                            std::to_string(pid) + " ORDER BY name");
}

const Rows kAppLaunches = {{"physics::step(double*, int)", "2"},
                           {"plain_add(float*, int)", "7"},
                           {"void scale<double>(double*, double, int)", "5"},
                           {"void scale<float>(float*, float, int)", "3"}};

Rows app_names(const std::string& source) {
  return {{"physics::step(double*, int)", "_ZN7physics4stepEPdi", source},
          {"plain_add(float*, int)", "_Z9plain_addPfi", source},
          {"void scale<double>(double*, double, int)", "_Z5scaleIdEvPT_S0_i", source},
          {"void scale<float>(float*, float, int)", "_Z5scaleIfEvPT_S0_i", source}};
}

TEST(KernelNames, RealCudaProgramStartedUnderTheTracerIsNamedByItsRegistration) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP}, 17, {}, &pid);
  EXPECT_EQ(kernels_of(db, pid), kAppLaunches);
  EXPECT_EQ(names_of(db, pid), app_names("registration"));
  // The vendor view names them too; the registrations are not calls.
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM cuda_events WHERE kernel = "
                      "'void scale<double>(double*, double, int)'"),
            5);
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM calls WHERE op LIKE '%Register%' OR kind = "
                      "'kernel_name'"),
            0);
  EXPECT_EQ(query_rows(db,
                       "SELECT kernels_named, unnamed_launches, unnamed_functions, "
                       "unreadable_kernel_names FROM sessions"),
            (Rows{{"4", "0", "0", "0"}}));
}

// A kernel's registration is read once, from a call site of its own, and stored without a
// stack: it walks none. PyTorch registers 21,577 kernels at import; their walks overflowed the
// stack ring on an H200 (17,784 stack records lost in every trace, the reader saturated).
TEST(KernelNames, RegistrationsWalkNoStack) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP, "register-only"}, 0, {}, &pid);
  EXPECT_EQ(names_of(db, pid), app_names("registration"));
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["stack_walks"], 0) << stats.dump();
  EXPECT_EQ(stats["stack_drops"], 0) << stats.dump();
  EXPECT_EQ(stats["stack_unknown_refs"], 0) << stats.dump();
  EXPECT_GE(stats["kernel_name_records"], 4) << stats.dump();
}

TEST(KernelNames, StrippedProgramStartedUnderTheTracerIsStillNamed) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP_STRIPPED);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP_STRIPPED}, 17, {}, &pid);
  EXPECT_EQ(kernels_of(db, pid), kAppLaunches);
  EXPECT_EQ(names_of(db, pid), app_names("registration"));
}

TEST(KernelNames, ProgramRunningBeforeTheTracerIsNamedByItsSymbols) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP);
  int pid = 0;
  std::string err;
  std::string db = trace_running(INGERO_KERNELS_APP, 17, &pid, &err);
  EXPECT_EQ(kernels_of(db, pid), kAppLaunches);
  EXPECT_EQ(names_of(db, pid), app_names("elf_symbol"));
  EXPECT_EQ(query_int(db, "SELECT sum(unnamed_launches) FROM sessions"), 0);
}

TEST(KernelNames, StrippedProgramRunningBeforeTheTracerIsUnnamedCountedAndExplained) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP_STRIPPED);
  int pid = 0;
  std::string err;
  std::string db = trace_running(INGERO_KERNELS_APP_STRIPPED, 17, &pid, &err);
  // Never guessed: NULL, and counted.
  EXPECT_EQ(kernels_of(db, pid), (Rows{{"NULL", "17"}}));
  EXPECT_EQ(names_of(db, pid), Rows{});
  EXPECT_EQ(query_rows(db,
                       "SELECT kernels_named, unnamed_launches, unnamed_functions FROM "
                       "sessions"),
            (Rows{{"0", "17", "4"}}));
  EXPECT_NE(err.find("17 launches of 4 functions have none"), std::string::npos) << err;
  std::string out, e;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &out, &e), 0) << e;
  EXPECT_NE(out.find("17 launches (of 4 functions) have no kernel name: their kernels were "
                     "registered before the trace began"),
            std::string::npos)
      << out;
}

// A training-like loop taking two kernels in turn, traced with the defaults: its launches fold
// into runs of both kernels as blocks close, and explain still counts each kernel per step (it
// said "kernels per step: not known (every steady step has folded launches)" where SQL named
// every launch).
TEST(KernelNames, KernelsTakenInTurnAreCountedPerStepInATraceAsRecorded) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP);
  int pid = 0;
  std::string db = trace_workload({INGERO_KERNELS_APP, "steps", "300"}, 30000, {}, &pid);
  EXPECT_GT(query_int(db, "SELECT sum(folded) FROM call_store"), 20000);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  const nlohmann::json* p = nullptr;
  for (const auto& q : j["kernels"]["processes"])
    if (q["pid"] == pid) p = &q;
  ASSERT_NE(p, nullptr) << j["kernels"].dump();
  EXPECT_EQ((*p)["launches"], 30000);
  EXPECT_EQ((*p)["folded_launches"], 0);
  EXPECT_GT((*p)["steady_steps"].get<int>(), 250);
  EXPECT_EQ((*p)["whole_steps"], (*p)["steady_steps"]);
  std::map<std::string, std::pair<int, int>> got;  // launches, per step
  for (const auto& k : (*p)["kernels"])
    got[k["name"]] = {k["launches"].get<int>(), k["per_step_median"].get<int>()};
  EXPECT_EQ(got, (std::map<std::string, std::pair<int, int>>{{"plain_add", {15000, 50}},
                                                             {"scale<float>", {15000, 50}}}));
}

TEST(KernelNames, DriverLookUpsNameTheirHandlesAndAHandleNeverLookedUpStaysUnnamed) {
  REQUIRE_BPF();
  int pid = 0;
  std::string db = trace_workload({INGERO_DRIVER_KERNELS, INGERO_FAKE_CUDA}, 13,
                                  {"CUDA_HOME=" INGERO_FAKE_CUDA_HOME}, &pid);
  EXPECT_EQ(kernels_of(db, pid), (Rows{{"NULL", "2"},
                                       {"reduce_v2(float*, int)", "1"},
                                       {"vector_add", "4"},
                                       {"void matmul::tile<16>(float*, float*)", "6"}}));
  // The names in the program's file, and the one on its heap; the failed look-up names nothing.
  EXPECT_EQ(names_of(db, pid), (Rows{{"reduce_v2(float*, int)", "_Z9reduce_v2Pfi", "driver_lookup"},
                                     {"vector_add", "vector_add", "driver_lookup"},
                                     {"void matmul::tile<16>(float*, float*)",
                                      "_ZN6matmul4tileILi16EEEvPfS1_", "driver_lookup"}}));
  EXPECT_EQ(query_rows(db,
                       "SELECT kernels_named, unnamed_launches, unnamed_functions, "
                       "unreadable_kernel_names FROM sessions"),
            (Rows{{"3", "2", "1", "0"}}));
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM calls WHERE op IN ('cuModuleGetFunction', "
                      "'cuFuncGetName')"),
            0);
}

// cuDNN looks a kernel up again before each launch (125-131 look-ups a step of ResNet-18 on an
// H200). A repeat whose answer went out lately ships nothing; one whose question alone fixes
// its answer (a handle's name) is not even entered. A failed look-up answers nothing and holds
// nothing back. The window (1 s by default) is stretched past any stall of a loaded machine and
// still expires between the two batches: each answer goes out once a batch.
struct Repeats {
  Rows kernels, names;
  nlohmann::json stats;
};
Repeats trace_repeats(int rounds, const std::string& attach_env) {
  int pid = 0;
  std::vector<std::string> env = {"CUDA_HOME=" INGERO_FAKE_CUDA_HOME,
                                  "INGERO_TEST_NAME_REPEAT_MS=2000"};
  if (!attach_env.empty()) env.push_back(attach_env);
  std::string db = trace_workload(
      {INGERO_DRIVER_KERNELS, INGERO_FAKE_CUDA, "repeat", std::to_string(rounds), "3000"},
      2 * rounds, env, &pid);
  return {kernels_of(db, pid), names_of(db, pid),
          nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0])};
}

TEST(KernelNames, ALookUpRepeatedBeforeEachLaunchShipsEachAnswerOnce) {
  REQUIRE_BPF();
  constexpr int kRounds = 200;
  Repeats r = trace_repeats(kRounds, "");
  EXPECT_EQ(r.kernels, (Rows{{"vector_add", std::to_string(2 * kRounds)}}));
  EXPECT_EQ(r.names, (Rows{{"vector_add", "vector_add", "driver_lookup"}}));
  // A batch: the look-up and the name once each, every failed look-up.
  EXPECT_EQ(r.stats["kernel_name_records"], 2 * (2 + kRounds)) << r.stats.dump();
  EXPECT_EQ(r.stats["kernel_name_records_by_op"],
            (nlohmann::json{{"cuModuleGetFunction", 2 * (1 + kRounds)}, {"cuFuncGetName", 2}}));
  EXPECT_EQ(r.stats["name_answered_again"], 2 * (kRounds - 1)) << r.stats.dump();
  EXPECT_EQ(r.stats["name_asked_again"], 2 * (kRounds - 1)) << r.stats.dump();
  EXPECT_EQ(r.stats["kernel_name_captures"], 1) << r.stats.dump();
  EXPECT_EQ(r.stats["kernel_name_repeats"], 3) << r.stats.dump();
}

// Without uprobe sessions (uprobe_multi pairs, as on kernels before 6.12) every look-up's return
// probe fires: repeats are held back there.
TEST(KernelNames, WithoutSessionsARepeatedLookUpIsHeldBackAtItsReturn) {
  REQUIRE_BPF();
  constexpr int kRounds = 200;
  Repeats r = trace_repeats(kRounds, "INGERO_CALL_ATTACH=multi");
  EXPECT_EQ(r.kernels, (Rows{{"vector_add", std::to_string(2 * kRounds)}}));
  EXPECT_EQ(r.names, (Rows{{"vector_add", "vector_add", "driver_lookup"}}));
  EXPECT_EQ(r.stats["kernel_name_records"], 2 * (2 + kRounds)) << r.stats.dump();
  EXPECT_EQ(r.stats["name_answered_again"], 4 * (kRounds - 1)) << r.stats.dump();
  EXPECT_EQ(r.stats["name_asked_again"], 0) << r.stats.dump();
}

// Look-ups that only repeat rest (capture/lookup_rest.h): a look-up, its name asked and a launch
// every 100 us put both look-up probes to rest. A kernel new to the program, looked up while they
// rest, is launched unnamed: that brings them back, its next look-up names it, and every launch
// of it, those before included, carries the name; nothing is left unnamed.
constexpr long kAtRest = 3000;  // rounds made at once after the first phase
struct RestRun {
  int pid = 0;
  long rounds = 0, reduce = 0;  // the first phase's rounds, the launches of the new kernel
  std::string db, err;
};
// Runs `driver_kernels LIB rest kAtRest` under the tracer with `flags`: `between` runs while its
// first phase repeats the look-ups, then kAtRest rounds more are made at once, and its second
// phase (the new kernel) ends once `second` returns.
RestRun trace_rest(const std::vector<std::string>& flags,
                   const std::function<void(Subprocess&)>& between,
                   const std::function<void(Subprocess&, const std::string& db)>& second,
                   const std::string& mode = "") {
  RestRun run;
  run.db = temp_path("rest.db");
  std::vector<std::string> argv = {INGERO_BIN, "trace", "--no-live", "--db", run.db};
  argv.insert(argv.end(), flags.begin(), flags.end());
  for (const char* a : {"--", INGERO_DRIVER_KERNELS, INGERO_FAKE_CUDA, "rest"}) argv.push_back(a);
  argv.push_back(std::to_string(kAtRest));
  if (!mode.empty()) argv.push_back(mode);
  auto tracer = Subprocess::spawn(argv, {"CUDA_HOME=" INGERO_FAKE_CUDA_HOME});
  run.pid = pid_of(tracer, "workload");
  EXPECT_TRUE(tracer.wait_stdout_line("ready", seconds(30))) << tracer.err();
  tracer.write_stdin("go\n");
  between(tracer);
  tracer.write_stdin("go\n");
  std::string line;
  EXPECT_TRUE(tracer.wait_stdout_line("looked up ", seconds(30), &line)) << tracer.err();
  run.rounds = std::stol(line.substr(line.find("looked up ") + 10));
  second(tracer, run.db);
  tracer.write_stdin("stop\n");
  EXPECT_TRUE(tracer.wait_stdout_line("launched ", seconds(30), &line)) << tracer.err();
  run.reduce = std::stol(line.substr(line.find("launched ") + 9));
  EXPECT_TRUE(wait_for(run.db, launches_of(run.pid), run.rounds + kAtRest + run.reduce))
      << tracer.err();
  tracer.close_stdin();
  EXPECT_EQ(tracer.wait(), 0) << tracer.err();
  run.err = tracer.err();
  return run;
}

// Waits until the tracer has said that both of the workload's look-up probes rest (each rests
// once it held back 2,000 since the sample after its last news: a second apart, or together);
// `said`: those lines.
void wait_both_at_rest(Subprocess& t, std::string* said = nullptr) {
  for (int probes = 0; probes < 2;) {
    std::string line;
    ASSERT_TRUE(t.wait_stderr_line("probes at rest", seconds(60), &line)) << t.err();
    if (said) *said += line + "\n";
    probes += (line.find("cuFuncGetName") != std::string::npos) +
              (line.find("cuModuleGetFunction") != std::string::npos);
  }
}

TEST(KernelNames, LookUpsThatOnlyRepeatRestAndAnUnnamedLaunchBringsThemBack) {
  REQUIRE_BPF();
  std::string rest;
  RestRun run = trace_rest(
      {}, [&](Subprocess& t) { wait_both_at_rest(t, &rest); },
      [](Subprocess& t, const std::string& db) {
        ASSERT_TRUE(t.wait_stderr_line("attached again", seconds(60))) << t.err();
        EXPECT_TRUE(
            wait_for(db, "SELECT count(*) FROM kernel_names WHERE raw_name = '_Z9reduce_v2Pfi'", 1))
            << t.err();
      });
  EXPECT_NE(rest.find("each named nothing new in 2000 calls or more): "), std::string::npos)
      << rest;
  EXPECT_NE(run.err.find("a kernel was launched without a name: 2 resting kernel look-up probes "
                         "are attached again"),
            std::string::npos)
      << run.err;
  ASSERT_GT(run.reduce, 0);
  EXPECT_EQ(kernels_of(run.db, run.pid),
            (Rows{{"reduce_v2(float*, int)", std::to_string(run.reduce)},
                  {"vector_add", std::to_string(run.rounds + kAtRest)}}));
  EXPECT_EQ(
      query_rows(run.db, "SELECT kernels_named, unnamed_launches, unnamed_functions FROM sessions"),
      (Rows{{"2", "0", "0"}}));
  auto stats = nlohmann::json::parse(query_rows(run.db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["lookup_probes_rested"], 2) << stats.dump();
  EXPECT_EQ(stats["lookup_wakes"], 1) << stats.dump();
  // The kAtRest rounds made after the rest was said entered neither look-up: at most the first
  // phase's were held back (its first of each went out), and the new kernel's after the wake.
  EXPECT_LT(stats["name_answered_again"].get<long>(), run.rounds + run.reduce) << stats.dump();
  EXPECT_LT(stats["name_asked_again"].get<long>(), run.rounds) << stats.dump();
}

// --keep-lookup-probes: the same look-ups never rest, and each is held back in BPF.
TEST(KernelNames, KeepLookupProbesKeepsThemAttached) {
  REQUIRE_BPF();
  RestRun run = trace_rest(
      {"--keep-lookup-probes"},
      // Past a rest's first chances (once a second), with time to spare on a loaded machine.
      [](Subprocess&) { std::this_thread::sleep_for(seconds(4)); },
      // Until the new kernel is named, so that it was launched before the stop: 200 ms after
      // "looked up" the workload was still in its rounds on a slow host, and launched none.
      [](Subprocess& t, const std::string& db) {
        EXPECT_TRUE(
            wait_for(db, "SELECT count(*) FROM kernel_names WHERE raw_name = '_Z9reduce_v2Pfi'", 1))
            << t.err();
      });
  EXPECT_GT(run.reduce, 0);
  EXPECT_EQ(run.err.find("probes at rest"), std::string::npos) << run.err;
  EXPECT_EQ(kernels_of(run.db, run.pid),
            (Rows{{"reduce_v2(float*, int)", std::to_string(run.reduce)},
                  {"vector_add", std::to_string(run.rounds + kAtRest)}}));
  auto stats = nlohmann::json::parse(query_rows(run.db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["lookup_probes_rested"], 0) << stats.dump();
  // Every look-up of vector_add but those that went out (its first, then one a second) is held
  // back at its return, the kAtRest rounds' too.
  EXPECT_GE(stats["name_answered_again"].get<long>(), run.rounds + kAtRest - 10) << stats.dump();
  EXPECT_NE(query_rows(run.db, "SELECT flags FROM sessions")[0][0].find("keep-lookup-probes"),
            std::string::npos);
}

// A kernel looked up once, while the look-ups rest, by a program that never asks again: its
// launches wake them but stay unnamed, and the tracer and explain say that this is why.
TEST(KernelNames, AKernelLookedUpOnceWhileTheLookUpsRestStaysUnnamedAndIsSaidToBe) {
  REQUIRE_BPF();
  RestRun run = trace_rest(
      {}, [](Subprocess& t) { wait_both_at_rest(t); },
      [](Subprocess& t, const std::string&) {
        ASSERT_TRUE(t.wait_stderr_line("attached again", seconds(60))) << t.err();
      },
      "once");
  ASSERT_GT(run.reduce, 0);
  EXPECT_EQ(kernels_of(run.db, run.pid),
            (Rows{{"NULL", std::to_string(run.reduce)},
                  {"vector_add", std::to_string(run.rounds + kAtRest)}}));
  EXPECT_EQ(
      query_rows(run.db, "SELECT kernels_named, unnamed_launches, unnamed_functions FROM sessions"),
      (Rows{{"1", std::to_string(run.reduce), "1"}}));
  auto stats = nlohmann::json::parse(query_rows(run.db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["unnamed_functions_at_rest"], 1) << stats.dump();
  EXPECT_EQ(stats["lookup_wakes"], 1) << stats.dump();
  EXPECT_NE(run.err.find("; 1 of those functions was first launched while the kernel look-up "
                         "probes rested"),
            std::string::npos)
      << run.err;
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", run.db}, &out, &err), 0) << err;
  EXPECT_NE(out.find(std::to_string(run.reduce) +
                     (run.reduce == 1 ? " launch (of 1 function) has"
                                      : " launches (of 1 function) have") +
                     " no kernel name: they were first launched while the tracer's kernel "
                     "look-up probes rested, and their library did not look them up again (trace "
                     "with --keep-lookup-probes)"),
            std::string::npos)
      << out;
}

// A process newly mapping a library whose look-ups rest wakes them before its own look-ups
// (a new process looks a kernel up once, before its first launch): its kernel is named.
TEST(KernelNames, AProcessNewlyMappingTheLibraryWakesTheLookUpsBeforeItsOwn) {
  REQUIRE_BPF();
  std::string db = temp_path("newcomer.db");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--",
                                   INGERO_DRIVER_KERNELS, INGERO_FAKE_CUDA, "rest", "0", "child"},
                                  {"CUDA_HOME=" INGERO_FAKE_CUDA_HOME});
  (void)pid_of(tracer, "workload");
  ASSERT_TRUE(tracer.wait_stdout_line("ready", seconds(30))) << tracer.err();
  tracer.write_stdin("go\n");
  wait_both_at_rest(tracer);
  tracer.write_stdin("go\n");
  std::string line;
  ASSERT_TRUE(tracer.wait_stdout_line("looked up ", seconds(30), &line)) << tracer.err();
  long rounds = std::stol(line.substr(line.find("looked up ") + 10));
  ASSERT_TRUE(tracer.wait_stdout_line("child ready", seconds(30))) << tracer.err();
  ASSERT_TRUE(
      tracer.wait_stderr_line("a process newly mapped a library whose kernel look-ups "
                              "rest: 2 resting kernel look-up probes are attached again",
                              seconds(60)))
      << tracer.err();
  tracer.write_stdin("go\n");  // read by the child: its parent waits for it
  ASSERT_TRUE(tracer.wait_stdout_line("child done", seconds(30))) << tracer.out() << tracer.err();
  ASSERT_TRUE(wait_for(db, "SELECT count(*) FROM calls WHERE kind = 'launch'", rounds + 3))
      << tracer.err();
  tracer.close_stdin();
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  EXPECT_EQ(query_rows(db,
                       "SELECT coalesce(kernel, 'NULL'), count(*) FROM calls WHERE kind = "
                       "'launch' GROUP BY 1 ORDER BY 1"),
            (Rows{{"reduce_v2(float*, int)", "3"}, {"vector_add", std::to_string(rounds)}}));
  EXPECT_EQ(query_int(db, "SELECT count(DISTINCT pid) FROM calls WHERE kind = 'launch'"), 2);
  EXPECT_EQ(query_rows(db, "SELECT unnamed_launches, unnamed_functions FROM sessions"),
            (Rows{{"0", "0"}}));
  auto stats = nlohmann::json::parse(query_rows(db, "SELECT bpf_stats FROM sessions")[0][0]);
  EXPECT_EQ(stats["lookup_wakes"], 1) << stats.dump();
  EXPECT_EQ(stats["unnamed_functions_at_rest"], 0) << stats.dump();
}

TEST(KernelNames, HipRegistrationAndModuleLookUpName) {
  REQUIRE_BPF();
  int pid = 0;
  std::string db = trace_workload({INGERO_HIP_KERNELS, INGERO_FAKE_HIP}, 9,
                                  {"ROCM_PATH=" INGERO_FAKE_ROCM}, &pid);
  EXPECT_EQ(kernels_of(db, pid), (Rows{{"axpy_kernel", "2"},
                                       {"conv::forward(float const*, float*)", "4"},
                                       {"reduce(float*, int)", "3"}}));
  EXPECT_EQ(
      names_of(db, pid),
      (Rows{{"axpy_kernel", "axpy_kernel", "registration"},
            {"conv::forward(float const*, float*)", "_ZN4conv7forwardEPKfPf", "driver_lookup"},
            {"reduce(float*, int)", "_Z6reducePfi", "registration"}}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM hip_events WHERE kernel IS NOT NULL"), 9);
}

TEST(KernelNames, NoKernelNamesAttachesNoNameProbe) {
  REQUIRE_BPF();
  REQUIRE_KERNELS_APP(INGERO_KERNELS_APP);
  std::string db = temp_path("off.db");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--no-kernel-names", "--db",
                                   db, "--", INGERO_KERNELS_APP});
  int pid = pid_of(tracer, "workload");
  ASSERT_TRUE(tracer.wait_stdout_line("ready", seconds(30))) << tracer.err();
  tracer.write_stdin("go\n");
  ASSERT_TRUE(tracer.wait_stdout_line("launched", seconds(30)));
  ASSERT_TRUE(wait_for(db, launches_of(pid), 17)) << tracer.err();
  tracer.close_stdin();
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  EXPECT_EQ(kernels_of(db, pid), (Rows{{"NULL", "17"}}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM kernel_names"), 0);
  EXPECT_EQ(query_int(db,
                      "SELECT specs_total FROM libraries WHERE path LIKE '%libcudart.so%' "
                      "ORDER BY id LIMIT 1"),
            26);
  EXPECT_NE(query_rows(db, "SELECT flags FROM sessions")[0][0].find("no-kernel-names"),
            std::string::npos);
}

}  // namespace
}  // namespace ingero::test
