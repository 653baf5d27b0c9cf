// Flags of `ingero trace` given together that cannot both hold, or one that does nothing
// without another, are usage errors said before anything starts (app/trace_flags.h, conflict).
// Found by a hostile-testing helper: `--all --pid P -- COMMAND` traced neither every process nor
// the command, 0 calls, exit 0; the others were accepted without a word and did nothing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "app/trace_flags.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(TraceFlagConflicts, EachIsAUsageErrorSaidBeforeAnythingStarts) {
  const std::string db = temp_path("never.db");
  const std::string web = temp_path("web.yml");
  { std::ofstream(web) << "basic_auth_users: {}\n"; }
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--all", "--pid", "1", "--", "/bin/true"},
       "--all traces every process and --pid only those it names: give one of them"},
      {{"--otlp-spans", "--", "/bin/true"},
       "--otlp-spans sends spans to the --otlp endpoint: give --otlp URL"},
      {{"--keep-all", "--full-rows", "1s", "--", "/bin/true"},
       "--keep-all keeps every call's row for the whole trace, --full-rows for a time: give one "
       "of them"},
      {{"--no-stack", "--stack-samples", "5", "--", "/bin/true"},
       "--stack-samples sets how calls walk their stacks, and --no-stack walks none: give one of "
       "them"},
      {{"--no-stack", "--cpu-sample-hz", "99", "--", "/bin/true"},
       "--cpu-sample-hz samples stacks, and --no-stack captures none: give one of them "
       "(--cpu-sample-hz 0 turns sampling off)"},
      {{"--prometheus-web-config", web, "--", "/bin/true"},
       "--prometheus-web-config configures the --prometheus endpoint: give --prometheus ADDR"},
      // Found by a docs audit (helper-68): each of these was accepted, exit 0, and did nothing.
      {{"--all"},
       "--all traces every process beside a COMMAND, and none is given: without one every "
       "process is traced already (drop --all, or give -- COMMAND)"},
      {{"--otlp-interval", "5s", "--", "/bin/true"},
       "--otlp-interval sets how the --otlp export runs: give --otlp URL"},
      {{"--otlp-exit-timeout", "5s", "--", "/bin/true"},
       "--otlp-exit-timeout sets how the --otlp export runs: give --otlp URL"},
      {{"--otlp", "http://127.0.0.1:9", "--otlp-span-threshold", "5ms", "--", "/bin/true"},
       "--otlp-span-threshold sets which calls --otlp-spans exports: give --otlp-spans (and "
       "--otlp URL)"},
      {{"--otlp-span-rate", "5", "--", "/bin/true"},
       "--otlp-span-rate sets which calls --otlp-spans exports: give --otlp-spans (and --otlp "
       "URL)"},
      {{"--clickhouse-exit-timeout", "5s", "--", "/bin/true"},
       "--clickhouse-exit-timeout bounds shipping at exit: give --clickhouse URL"},
      {{"--no-stack", "--stack-interval", "5", "--", "/bin/true"},
       "--stack-interval sets how often threads walk their stacks, and --no-stack walks none: "
       "give one of them"},
  };
  for (const auto& [flags, said] : cases) {
    SCOPED_TRACE(flags.front());
    std::vector<std::string> argv = {"trace", "--db", db};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = run_ingero(argv);
    EXPECT_EQ(r.rc, 2);
    EXPECT_EQ(r.err, "ingero trace: " + said + "\n");
    EXPECT_FALSE(std::filesystem::exists(db));
  }
}

// Found by a docs audit (helper-68): `--backends ''` (an unset $BACKENDS) was read as no flag,
// every backend, without a word, as `--db ""` and `--since ""` were before.
TEST(TraceFlagConflicts, AnEmptyBackendListIsRefused) {
  const std::string db = temp_path("never.db");
  auto trace = run_ingero({"trace", "--backends", "", "--db", db, "--", "/bin/true"});
  EXPECT_EQ(trace.rc, 2);
  EXPECT_NE(trace.err.find("--backends: an empty list names no backend (leave --backends out to "
                           "use every one)"),
            std::string::npos)
      << trace.err;
  EXPECT_FALSE(std::filesystem::exists(db));
  auto check = run_ingero({"check", "--backends", ""});
  EXPECT_EQ(check.rc, 2);
  EXPECT_NE(check.err.find("--backends: an empty list names no backend"), std::string::npos)
      << check.err;
}

// `--backends rdma` without `--rdma-verbs` attached 0 probes and said nothing of why: it is
// said once, before tracing starts, and tracing goes on (the port counters are read).
TEST(TraceFlagConflicts, RdmaWithoutItsVerbsFlagIsSaid) {
  app::TraceOptions o;
  o.backends = "cuda,rdma";
  auto note = app::trace_flags::notice(o, /*rdma_verbs=*/false);
  ASSERT_TRUE(note);
  EXPECT_EQ(*note,
            "--backends names rdma, whose libibverbs calls are traced only with --rdma-verbs: "
            "without it, rdma reads the InfiniBand port counters alone");
  EXPECT_FALSE(app::trace_flags::notice(o, /*rdma_verbs=*/true));
  o.backends = "cuda,hip";
  EXPECT_FALSE(app::trace_flags::notice(o, false));
  o.backends = "";  // every backend: rdma among them is no choice the user made
  EXPECT_FALSE(app::trace_flags::notice(o, false));
}

// `--pid 5 --pid 3 --pid 5` traced 5 and 3 but stored "5,3,5" as the session's filter.
TEST(TraceFlagConflicts, APidGivenTwiceIsOne) {
  app::trace_flags::Args a;
  a.pids = {5, 3, 5};
  app::TraceOptions o;
  app::trace_flags::resolve(a, o);
  EXPECT_EQ(o.pids, (std::vector<uint32_t>{5, 3}));
}

// cli.md: "from the command line or a config file alike". `check --config` said "valid" of a
// file `trace --config` then refused (helper-68): both now name the file's line, and a file
// and a command line that contradict each other are refused as well.
TEST(TraceFlagConflicts, AConfigFileIsJudgedAsTheCommandLineIs) {
  const std::string db = temp_path("never.db");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"keep_all = true\nfull_rows = \"5m\"\n", "3:1: [trace] full_rows",
       "--keep-all keeps every call's row for the whole trace, --full-rows for a time: give one "
       "of them"},
      {"pid = [1]\nall = true\n", "3:1: [trace] all",
       "--all traces every process and --pid only those it names: give one of them"},
      {"otlp_spans = true\n", "2:1: [trace] otlp_spans",
       "--otlp-spans sends spans to the --otlp endpoint: give --otlp URL"},
      {"stack = false\ncpu_sample_hz = 10\n", "3:1: [trace] cpu_sample_hz",
       "--cpu-sample-hz samples stacks, and --no-stack captures none: give one of them "
       "(--cpu-sample-hz 0 turns sampling off)"},
      {"clickhouse_exit_timeout = \"5s\"\nnode = \"n1\"\n", "2:1: [trace] clickhouse_exit_timeout",
       "--clickhouse-exit-timeout bounds shipping at exit: give --clickhouse URL"},
  };
  int n = 0;
  for (const auto& [body, where, said] : cases) {
    SCOPED_TRACE(body);
    const std::string cfg = temp_path("conflict" + std::to_string(++n) + ".toml");
    { std::ofstream(cfg) << "[trace]\n" << body; }
    const std::string line = cfg + ":" + where + ": " + said + "\n";
    auto check = run_ingero({"check", "--config", cfg});
    EXPECT_EQ(check.rc, 1);
    EXPECT_EQ(check.out, line + "1 problem in " + cfg + "\n");
    auto trace = run_ingero({"trace", "--config", cfg, "--db", db, "--", "/bin/true"});
    EXPECT_EQ(trace.rc, 2);
    EXPECT_NE(trace.err.find("  " + line), std::string::npos) << trace.err;
    EXPECT_FALSE(std::filesystem::exists(db));
  }
  // Each half valid alone: the file and the command line together.
  const std::string cfg = temp_path("half.toml");
  { std::ofstream(cfg) << "[trace]\nkeep_all = true\n"; }
  auto check = run_ingero({"check", "--config", cfg});
  EXPECT_EQ(check.rc, 0) << check.out;
  auto trace =
      run_ingero({"trace", "--config", cfg, "--full-rows", "1s", "--db", db, "--", "/bin/true"});
  EXPECT_EQ(trace.rc, 2);
  EXPECT_EQ(trace.err,
            "ingero trace: --keep-all keeps every call's row for the whole trace, --full-rows "
            "for a time: give one of them\n");
  EXPECT_FALSE(std::filesystem::exists(db));
}

}  // namespace
}  // namespace ingero::test
