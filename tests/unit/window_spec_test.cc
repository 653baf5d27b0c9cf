// --from/--to times: a fraction and a zone are read, anything else is refused. A dropped
// offset would move the window by hours without a word.
#include "engine/window_spec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"
#include "tests/unit/step_source.h"

namespace ingero::engine {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT = 1795371619;  // 2026-11-22T18:20:19Z

TEST(WindowSpec, TimesWithFractionsAndZonesAreReadExactly) {
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22 18:20:19"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19Z"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19.5"), kT * kS + 500'000'000);
  EXPECT_EQ(parse_time_ns("2026-11-22T18:20:19.000000001Z"), kT * kS + 1);
  EXPECT_EQ(parse_time_ns("2026-11-22T20:20:19+02:00"), kT * kS);
  EXPECT_EQ(parse_time_ns("2026-11-22T20:20:19.25+0200"), kT * kS + 250'000'000);
  EXPECT_EQ(parse_time_ns("2026-11-22T13:20:19-05"), kT * kS);
  EXPECT_EQ(parse_time_ns(std::to_string(kT)), kT * kS);
}

TEST(WindowSpec, AnythingElseAfterTheSecondsIsRefused) {
  for (const char* bad :
       {"2026-11-22T18:20:19junk", "2026-11-22T18:20:19.", "2026-11-22T18:20:19.1234567891",
        "2026-11-22T18:20:19+2", "2026-11-22T18:20:19+25:00", "2026-11-22T18:20:19+02:00x",
        "2026-11-22T18:20:19 UTC"})
    EXPECT_EQ(parse_time_ns(bad), std::nullopt) << bad;
}

// Unix seconds as `date +%s.%N` prints them: a fraction of up to nine digits, and a sign before
// 1970 (the clock reaches back to 1677). Eleven digits or more without either are Unix ns.
TEST(WindowSpec, UnixSecondsTakeAFractionAndASign) {
  EXPECT_EQ(parse_time_ns("1795371619.5"), kT * kS + 500'000'000);
  EXPECT_EQ(parse_time_ns("1795371619.000000001"), kT * kS + 1);
  EXPECT_EQ(parse_time_ns("1795371619.123456789"), kT * kS + 123'456'789);
  EXPECT_EQ(parse_time_ns("-1"), -kS);
  EXPECT_EQ(parse_time_ns("-1.25"), -kS - 250'000'000);
  EXPECT_EQ(parse_time_ns("-9223372036"), -int64_t(9223372036) * kS);  // 1677-09-21
  EXPECT_EQ(parse_time_ns("1795371619000000000"), kT * kS);            // ns
  for (const char* bad :
       {"1795371619.", ".5", "-", "--1", "1-2", "1.2.3", "-.5", "1795371619.1234567891",
        "1795371619000000000.5", "-9223372037", "-1795371619000000000", "1795371619.5Z"})
    EXPECT_EQ(parse_time_ns(bad), std::nullopt) << bad;
}

// Unix ns in an int64_t end on 2262-04-11T23:47:16.854775807Z: a time past it (or before
// 1677) was wrapped around into another century, and a window ending in 2300 was "after --from".
TEST(WindowSpec, TimesTheClockCannotHoldAreRefusedNotWrapped) {
  EXPECT_EQ(parse_time_ns("9223372036"), int64_t(9223372036) * kS);
  EXPECT_EQ(parse_time_ns("2262-04-11T23:47:16.854775807Z"), INT64_MAX);
  EXPECT_EQ(parse_time_ns("9223372036854775807"), INT64_MAX);  // ns
  for (const char* bad :
       {"9223372037", "9300000000", "99999999999", "9223372036854775808", "9999999999999999999",
        "2262-04-11T23:47:16.854775808Z", "2262-04-11T23:47:17", "2300-01-01T00:00:00",
        "9999-12-31T23:59:59", "1600-01-01T00:00:00"})
    EXPECT_EQ(parse_time_ns(bad), std::nullopt) << bad;
}

TEST(WindowSpec, DatesThatDoNotExistAreRefused) {
  for (const char* bad : {"2026-02-30T02:22:30", "2026-02-29T00:00:00", "2026-04-31T00:00:00",
                          "2026-11-22T18:20:60", "2026-11-22T18:20:61"})
    EXPECT_EQ(parse_time_ns(bad), std::nullopt) << bad;
  EXPECT_EQ(parse_time_ns("2028-02-29T00:00:00Z"), int64_t(1835395200) * kS);  // a leap year
}

TEST(WindowSpec, SinceIsNotCombinedWithFromOrTo) {
  step_source::Source src;
  for (WindowSpec spec : {WindowSpec{"5s", "1795371619", "", std::nullopt},
                          WindowSpec{"5s", "", "1795371619", std::nullopt}}) {
    auto w = resolve_window(src, spec);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().message, "--since cannot be combined with --from or --to");
  }
  auto w = resolve_window(src, WindowSpec{"0.000000000001s", "", "", std::nullopt});
  ASSERT_FALSE(w);  // shorter than a nanosecond: no window at all
  w = resolve_window(src, WindowSpec{"10000000000000000000s", "", "", std::nullopt});
  ASSERT_FALSE(w);  // past a century, as every duration (it was read as the whole trace)
  EXPECT_EQ(w.error().message, "bad --since '10000000000000000000s': longer than a century");
  w = resolve_window(src, WindowSpec{"36525d", "", "", std::nullopt});
  ASSERT_TRUE(w);  // a century back from this trace's end (0)
  EXPECT_EQ(w->from_ns, -int64_t(36525) * 86400 * kS);
}

// A malformed window is a usage error (exit 2) from every command that takes one, said before
// any file is opened: report said it with exit 1, and a missing file hid it.
TEST(WindowSpec, EveryCommandCallsAMalformedWindowAUsageErrorBeforeReadingAnyFile) {
  const std::string missing = "/nonexistent/ingero-trace.db";
  struct Case {
    std::vector<std::string> flags;
    std::string said;
  };
  const std::vector<Case> cases = {
      {{"--from", "garbage"},
       "bad --from 'garbage' (use 2026-04-03T12:18:02 or Unix seconds, a real date between 1677 "
       "and 2262)"},
      {{"--to", "2026-02-30T00:00:00Z"}, "bad --to '2026-02-30T00:00:00Z'"},
      {{"--since", "-5m"}, "bad --since '-5m' (use 30s, 5m, 1h)"},
      {{"--since", "5"}, "bad --since '5' (use 30s, 5m, 1h)"},
      {{"--since", "5m", "--from", "1795371619"}, "--since cannot be combined with --from or --to"},
      {{"--from", "1795371619", "--to", "1795371618"}, "--from is after --to"},
  };
  for (const std::string cmd : {"explain", "report", "export", "dashboard"}) {
    for (const Case& c : cases) {
      std::vector<std::string> args = {cmd, "--db", missing};
      args.insert(args.end(), c.flags.begin(), c.flags.end());
      auto r = test::run_ingero(args);
      EXPECT_EQ(r.rc, 2) << cmd << " " << c.flags[0] << ": " << r.err;
      EXPECT_NE(r.err.find("ingero " + cmd + ": " + c.said), std::string::npos)
          << cmd << ": " << r.err;
      EXPECT_EQ(r.out, "") << cmd;
    }
  }
  // The spec alone, as the commands check it.
  EXPECT_TRUE(check_window_spec(WindowSpec{"5m", "", "", std::nullopt}));
  EXPECT_TRUE(check_window_spec(WindowSpec{"", "1795371618", "1795371619", std::nullopt}));
  EXPECT_FALSE(check_window_spec(WindowSpec{"", "1795371619", "1795371618", std::nullopt}));
}

// A duration is written with its unit wherever one is taken: `explain --since 5` read as 5 s
// without a word (5 what?), as did trace's --otlp-* durations and ship's --timeout; compact's
// --full-rows and trace's other durations already refused a bare number. The MCP tools' schema
// takes us and ns, which the parser now reads too.
TEST(WindowSpec, ADurationWithoutItsUnitIsRefusedByEveryFlag) {
  EXPECT_LT(parse_duration_s("5"), 0);
  EXPECT_LT(parse_duration_s("2.5"), 0);
  // Only digits, a fraction and the unit: std::stod read these as numbers.
  for (const char* odd : {"1e3s", "0x10s", " 5s", "+5s", "5 s", ".5s", "5.s", "-0s", "infs", "5M"})
    EXPECT_LT(parse_duration_s(odd), 0) << odd;
  EXPECT_DOUBLE_EQ(parse_duration_s("2.5s"), 2.5);
  EXPECT_DOUBLE_EQ(parse_duration_s("0.5ms"), 0.5e-3);
  EXPECT_EQ(parse_duration_s("0s"), 0);
  EXPECT_EQ(parse_duration_s("5s"), 5);
  EXPECT_DOUBLE_EQ(parse_duration_s("500us"), 500e-6);
  EXPECT_DOUBLE_EQ(parse_duration_s("100ns"), 100e-9);
  EXPECT_EQ(parse_duration_s("2m"), 120);
  const std::string missing = "/nonexistent/ingero-trace.db";
  struct Case {
    std::vector<std::string> args;
    std::string said;
  };
  const std::vector<Case> cases = {
      {{"trace", "--otlp", "http://127.0.0.1:1", "--otlp-interval", "10", "--", "true"},
       "--otlp-interval: '10' has no unit: write a duration with its unit (500ms, 10s, 1m)"},
      {{"trace", "--otlp", "http://127.0.0.1:1", "--otlp-span-threshold", "1", "--", "true"},
       "--otlp-span-threshold: '1' has no unit: write a duration with its unit (500ms, 10s, 1m)"},
      {{"ship", "--db", missing, "--clickhouse", "http://127.0.0.1:1/db", "--timeout", "10"},
       "ingero ship: bad --timeout '10' (use 30s, 5m)"},
      // Its own rule (0s: off, else at least 1s) on top of every duration's, not instead.
      {{"trace", "--inflight-after", "10", "--", "true"},
       "--inflight-after: '10' has no unit: write a duration with its unit (5s, 1m)"},
      {{"trace", "--inflight-after", "999999d", "--", "true"},
       "--inflight-after: '999999d' is longer than a century"},
      {{"trace", "--inflight-after", "500ms", "--", "true"},
       "--inflight-after must be 0s (off) or at least 1s"},
  };
  // Zero is off, with or without a unit (configs written before these rules hold a bare 0).
  for (const char* off : {"0", "0s", "0ms"}) {
    std::string conf = test::temp_path("inflight-off.toml");
    std::ofstream(conf) << "[trace]\ninflight_after = \"" << off << "\"\n";
    auto r = test::run_ingero({"check", "--config", conf});
    EXPECT_EQ(r.rc, 0) << off << ": " << r.out << r.err;
  }
  for (const Case& c : cases) {
    auto r = test::run_ingero(c.args);
    EXPECT_EQ(r.rc, 2) << c.args[0] << ": " << r.err;
    EXPECT_NE(r.err.find(c.said), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

// A node name is stamped on every event and shipped to the fleet: 1 to 255 bytes (a UTF-8
// character may be several), no control characters; anything else is refused before tracing.
TEST(WindowSpec, ANodeNameIsOneTo255BytesWithoutControlCharacters) {
  const std::string said =
      "--node: a node name is 1 to 255 bytes (UTF-8), none of them control characters";
  // Not UTF-8 ("\xff\xfe") was stored raw, and read back as U+FFFD no --node could select.
  for (const std::string& bad :
       {std::string(""), std::string(256, 'n'), std::string("a\tb"), std::string("gpu-7\n"),
        std::string("x\x7f"), std::string("\xff\xfe"), std::string("gpu-\xc3")}) {
    auto r = test::run_ingero({"trace", "--node", bad, "--", "true"});
    EXPECT_EQ(r.rc, 2) << bad.size();
    EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // 255 bytes pass: 127 two-byte characters and one more byte, checked as the agent's config
  // file sets them (the same validator, without tracing); 256 do not.
  std::string longest;
  for (int i = 0; i < 127; ++i) longest += "\xc3\xa9";  // é
  longest += "n";
  ASSERT_EQ(longest.size(), 255u);
  for (const std::string& name : {longest, longest + "n"}) {
    std::string conf = test::temp_path("node.toml");
    std::ofstream(conf) << "[trace]\nnode = \"" << name << "\"\n";
    auto r = test::run_ingero({"check", "--config", conf});
    EXPECT_EQ(r.rc, name.size() == 255 ? 0 : 1) << r.out << r.err;
    EXPECT_EQ((r.out + r.err).find("a node name is") != std::string::npos, name.size() == 256)
        << r.out << r.err;
  }
}

// An empty window flag read as no flag, the whole trace, exit 0, in explain, report, export and
// the dashboard, where trace, compact and ship refused an empty duration.
TEST(WindowSpec, AnEmptyWindowFlagIsRefusedByEveryCommandThatReadsOne) {
  std::string db = test::write_free_calls(test::temp_path("empty.db"), 100);
  for (const char* cmd : {"explain", "report", "export", "dashboard"})
    for (const char* flag : {"--since", "--from", "--to"}) {
      auto r = test::run_ingero({cmd, "--db", db, flag, ""});
      EXPECT_EQ(r.rc, 2) << cmd << " " << flag << ": " << r.err;
      EXPECT_EQ(r.err.substr(0, r.err.find('\n')),
                std::string(flag) + ": empty: " +
                    (std::string(flag) == "--since"
                         ? "write a duration with its unit (30s, 5m, 1h)"
                         : "give a time (2026-04-03T12:18:02, UTC, or Unix seconds)"))
          << cmd;
      EXPECT_EQ(r.out, "") << cmd << " " << flag;
    }
  auto compact = test::run_ingero({"compact", db, "--full-rows", ""});
  EXPECT_EQ(compact.rc, 2);
  EXPECT_EQ(compact.err.substr(0, compact.err.find('\n')),
            "--full-rows: empty: write a duration with its unit (10m, 1h)");
}

// An empty path (`--db "$TRACE"` with TRACE unset) is a usage error from every command: read
// as no flag, explain, query, status and report read ~/.ingero/ingero.db, a file nobody named,
// the dashboard served "" for ever, and `report -o ''` wrote the page to standard output, then
// aborted (an uncaught filesystem_error naming where it wrote).
TEST(WindowSpec, AnEmptyPathIsRefusedByEveryCommand) {
  std::string db = test::write_free_calls(test::temp_path("paths.db"), 100);
  const std::vector<std::vector<std::string>> cases = {
      {"explain", "--db", ""},
      {"query", "--db", "", "SELECT 1"},
      {"status", "--db", ""},
      {"report", "--db", ""},
      {"export", "--db", ""},
      {"dashboard", "--db", ""},
      {"mcp", "--db", ""},
      {"ship", "--db", "", "--clickhouse", "http://127.0.0.1:1/db"},
      {"check", "--db", ""},
      {"demo", "--db", ""},
      {"trace", "--db", ""},
      {"report", "--db", db, "-o", ""},
      {"export", "--db", db, "-o", ""},
  };
  for (const auto& args : cases) {
    auto r = test::run_ingero(args);
    EXPECT_EQ(r.rc, 2) << args[0] << ": " << r.err;
    std::string flag = args[args.size() - 1].empty() ? args[args.size() - 2] : "--db";
    if (flag == "-o") flag = args[0] == "report" ? "--output" : "--out";
    EXPECT_EQ(r.err.substr(0, r.err.find('\n')), flag + ": an empty path names no file") << args[0];
    EXPECT_EQ(r.out, "") << args[0];
  }
}

// --since is a duration as every other: at most a century. Longer was read as the whole trace.
TEST(WindowSpec, ASincePastACenturyIsRefused) {
  std::string db = test::write_free_calls(test::temp_path("century.db"), 100);
  for (const char* cmd : {"explain", "report", "export"})
    for (const char* since :
         {"36526d", "9999999999999999999999d", "1000000000000000000000000000000s"}) {
      std::vector<std::string> args = {cmd, "--db", db, "--since", since};
      if (std::string(cmd) == "report") args.insert(args.end(), {"-o", test::temp_path("r.html")});
      auto r = test::run_ingero(args);
      EXPECT_EQ(r.rc, 2) << cmd << " " << since << ": " << r.err;
      EXPECT_EQ(r.err, "ingero " + std::string(cmd) + ": bad --since '" + since +
                           "': longer than a century\n")
          << cmd;
    }
  EXPECT_EQ(test::run_ingero({"explain", "--db", db, "--since", "36525d"}).rc, 0);  // a century
}

// A window that misses the trace is answered (exit 0, nothing to explain) and said to miss
// it, with the trace's own span: a --from in the wrong year or zone read as a quiet trace.
TEST(WindowSpec, AWindowThatMissesTheTraceIsSaidToMissIt) {
  std::string db = test::write_free_calls(test::temp_path("span.db"), 100);
  auto off = test::run_ingero({"explain", "--db", db, "--from", "10", "--to", "20"});
  EXPECT_EQ(off.rc, 0) << off.err;
  EXPECT_NE(
      off.err.find("ingero explain: the window holds no event of " + db + ", which runs from "),
      std::string::npos)
      << off.err;
  EXPECT_NE(off.out.find("nothing in this window needs explaining"), std::string::npos) << off.out;
  auto whole = test::run_ingero({"explain", "--db", db});
  EXPECT_EQ(whole.rc, 0) << whole.err;
  EXPECT_EQ(whole.err.find("holds no event"), std::string::npos) << whole.err;
  // report says it too (it wrote a page of nothing without a word).
  std::string page = test::temp_path("missed.html");
  auto rep = test::run_ingero({"report", "--db", db, "--from", "10", "--to", "20", "-o", page});
  EXPECT_EQ(rep.rc, 0) << rep.err;
  EXPECT_EQ(
      rep.err.rfind("ingero report: the window holds no event of " + db + ", which runs from ", 0),
      0u)
      << rep.err;
}

// A merged trace and one of its nodes: a window of other nodes' events that holds none of the
// node's was an empty report and no word (a hostile tester's --node gpu-node-01 --since 1m of
// the Go cluster file, whose gpu-node-01 ended 8 minutes before the others).
TEST(WindowSpec, AWindowThatMissesTheNodeAskedForIsSaidToMissIt) {
  const std::string db = std::string(INGERO_FIXTURES_DIR) + "/ingero-go/sample-cluster.db";
  auto r = test::run_ingero({"explain", "--db", db, "--node", "gpu-node-01", "--since", "1m"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err,
            "ingero explain: the window holds no event of node gpu-node-01, which runs "
            "from " +
                format_wall(1775218723111028602) + " to " + format_wall(1775218723272966405) +
                "\n");
  auto other = test::run_ingero({"explain", "--db", db, "--node", "gpu-node-03", "--since", "1m"});
  EXPECT_EQ(other.rc, 0) << other.err;
  EXPECT_EQ(other.err, "");
}

}  // namespace
}  // namespace ingero::engine
