// The agent's TOML config file (app/config_file.h): parsing, checking every key against the
// trace command's own CLI definition, applying it through CLI11 with flags winning, and the
// sample deploy/ingero.toml documenting every flag.
#include "app/config_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "app/check_config.h"
#include "app/commands.h"
#include "app/man_page.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

std::string write(const std::string& name, const std::string& text) {
  std::string p = test::temp_path(name);
  std::ofstream(p) << text;
  return p;
}

std::vector<std::string> problem_lines(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& p : check_config(parse_config_text(text, "f.toml"), config_cli_schema))
    out.push_back(format_problem("f.toml", p));
  return out;
}

// A CLI tree with `trace`, parsed up to the point where the trace would start: the config
// file is applied and the option callbacks have run, then the root's parse-complete callback
// (which CLI11 runs before any subcommand's) stops it. The trace callback itself is kept, as
// it owns the flags' storage.
struct TraceCli {
  struct Stop {};
  std::unique_ptr<CLI::App> app = config_cli_schema();
  CLI::App* trace = nullptr;
  TraceCli() {
    for (auto* s : app->get_subcommands([](CLI::App*) { return true; }))
      if (s->get_name() == "trace") trace = s;
    app->parse_complete_callback([] { throw Stop{}; });
  }
  // Parses a command line given in order (CLI11's vector overload takes it reversed).
  void parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());
    try {
      app->parse(args);
    } catch (const Stop&) {
      return;
    }
    ADD_FAILURE() << "the parse did not reach the point where trace starts";
  }
  std::string value(const std::string& flag) {
    auto r = trace->get_option(flag)->results();
    return r.empty() ? "<unset>" : r.front();
  }
};

TEST(ConfigFile, ValuesBecomeFlagStringsWithTheirLines) {
  auto parsed = parse_config_text(
      "# comment\n[trace]\nringbuf_mb = 32\nstack = false\nnode = \"gpu-01\"\n"
      "pid = [4411, 4412]\nflush_ms = 2.5e2\n",
      "f.toml");
  ASSERT_TRUE(parsed.problems.empty());
  ASSERT_EQ(parsed.entries.size(), 5u);
  const auto& e = parsed.entries;
  EXPECT_EQ(e[0].key, "ringbuf_mb");
  EXPECT_EQ(e[0].values, std::vector<std::string>{"32"});
  EXPECT_EQ(e[0].line, 3);
  EXPECT_EQ(e[1].values, std::vector<std::string>{"false"});
  EXPECT_EQ(e[2].values, std::vector<std::string>{"gpu-01"});
  EXPECT_EQ(e[3].values, (std::vector<std::string>{"4411", "4412"}));
  EXPECT_EQ(e[3].line, 6);
  EXPECT_EQ(e[4].values, std::vector<std::string>{"250"});
  EXPECT_EQ(e[4].table, "trace");
}

TEST(ConfigFile, SyntaxErrorNamesItsLine) {
  auto parsed = parse_config_text("[trace]\nringbuf_mb = 32\nnode = \"unterminated\n", "f.toml");
  ASSERT_EQ(parsed.problems.size(), 1u);
  EXPECT_EQ(parsed.problems[0].line, 3);
  EXPECT_TRUE(parsed.entries.empty());
}

TEST(ConfigFile, EveryUnknownKeyAndBadValueIsNamedWithItsLine) {
  auto lines = problem_lines(
      "top = 1\n"                    // 1
      "[trace]\n"                    // 2
      "ringbuf_mb = 17\n"            // 3
      "colour = \"red\"\n"           // 4
      "duration = \"soon\"\n"        // 5
      "stack_samples = 0\n"          // 6
      "ringbuf-mb = 4\n"             // 7
      "command = [\"ls\"]\n"         // 8
      "config = \"x.toml\"\n"        // 9
      "stack = true\n"               // 10
      "no_stack = true\n"            // 11
      "pid = [\"abc\"]\n"            // 12
      "prometheus = { a = 1 }\n"     // 13
      "help = true\n"                // 14
      "quiet = \"maybe\"\n"          // 15
      "[explain]\nsince = \"5m\"\n"  // 17
      "[explain_more]\nx = 1\n");    // 19
  std::vector<std::string> want = {
      "f.toml:1:1: top: key outside a table: put it under a [table] such as [trace]",
      "f.toml:3:1: [trace] ringbuf_mb: bad value: --ringbuf-mb: must be 0 (automatic) or a power "
      "of two up to 1024, not 17",
      "f.toml:4:1: [trace] colour: unknown key: `ingero trace` has no flag --colour (keys are its "
      "long flags with '_' for '-')",
      "f.toml:5:1: [trace] duration: bad value: --duration: bad duration 'soon' (use 30s, 5m, 1h)",
      "f.toml:6:1: [trace] stack_samples: bad value: --stack-samples: Value 0 not in range 1 to "
      "1000000",
      "f.toml:7:1: [trace] ringbuf-mb: unknown key: write flags with '_' for '-' (ringbuf_mb)",
      "f.toml:8:1: [trace] command: unknown key: `ingero trace` has no flag --command (keys are "
      "its "
      "long flags with '_' for '-')",
      "f.toml:9:1: [trace] config: --config cannot be set in a config file",
      "f.toml:11:1: [trace] no_stack: sets --stack again (already set by 'stack' on line 10)",
      "f.toml:12:1: [trace] pid: wrong type: --pid takes an integer, not a string (\"abc\")",
      "f.toml:13:1: [trace] prometheus: a nested table is not a flag value",
      "f.toml:14:1: [trace] help: unknown key: `ingero trace` has no flag --help (keys are its "
      "long "
      "flags with '_' for '-')",
      "f.toml:15:1: [trace] quiet: wrong type: --quiet takes true or false, not a string "
      "(\"maybe\")",
      "f.toml:17:1: [explain] since: unknown table [explain]: a config file holds [trace]",
      "f.toml:19:1: [explain_more] x: unknown table [explain_more]: a config file holds [trace]",
  };
  EXPECT_EQ(lines, want);
}

// Issue 37, item 10: `flush_ms = -1`, `stack = "yes"` and `duration = 12` passed as valid. The
// TOML type of every value is held against its flag's, and every flag has its range.
// A duration the session's nanosecond clock cannot hold is refused: 999999d overflowed into a
// deadline already past (the trace stopped at once, "tracing for -2147483648s"), and 0.1ns was
// no time at all.
TEST(ConfigFile, DurationsPastACenturyOrUnderANanosecondAreRefused) {
  auto lines = problem_lines(
      "[trace]\n"
      "duration = \"999999d\"\n"
      "retain = \"0.1ns\"\n"
      "otlp_interval = \"36600d\"\n");
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "f.toml:2:1: [trace] duration: bad value: --duration: '999999d' is longer "
                       "than a century",
                       "f.toml:3:1: [trace] retain: bad value: --retain: '0.1ns' is shorter than "
                       "a nanosecond",
                       "f.toml:4:1: [trace] otlp_interval: bad value: --otlp-interval: '36600d' "
                       "is longer than a century"}));
  EXPECT_TRUE(problem_lines("[trace]\nduration = \"36500d\"\nretain = \"1ns\"\n").empty());
}

// An unknown backend is named with its line by `check --config`, which called the file valid
// (`trace` then refused it without naming the file).
TEST(ConfigFile, AnUnknownBackendIsNamedWithItsLine) {
  auto lines = problem_lines("[trace]\nbackends = \"cuda,bogus\"\n");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("f.toml:2:1: [trace] backends: bad value: --backends: unknown backend "
                           "'bogus' (known: ",
                           0),
            0u)
      << lines[0];
  EXPECT_TRUE(problem_lines("[trace]\nbackends = \"cuda,nccl\"\n").empty());
}

TEST(ConfigFile, TypesAndRangesOfEveryKeyAreChecked) {
  auto lines = problem_lines(
      "[trace]\n"                        // 1
      "flush_ms = -1\n"                  // 2
      "stack = \"yes\"\n"                // 3
      "duration = 12\n"                  // 4
      "ringbuf_mb = \"32\"\n"            // 5
      "stack_samples = 2.5e2\n"          // 6
      "max_db_size = 2048\n"             // 7
      "node = 7\n"                       // 8
      "pid = [0]\n"                      // 9
      "prometheus = \"9464:x\"\n"        // 10
      "retain = \"12\"\n"                // 11
      "nice = -30\n"                     // 12
      "keep_all = 1\n"                   // 13
      "sysfs_root = \"/nonexistent\"\n"  // 14
      "db = \"\"\n"                      // 15
      "clickhouse_exit_timeout = 5\n"    // 16
      "inflight_after = true\n");        // 17
  std::vector<std::string> want = {
      "f.toml:2:1: [trace] flush_ms: bad value: --flush-ms: Value -1 not in range 1 to 60000",
      "f.toml:3:1: [trace] stack: wrong type: --stack takes true or false, not a string "
      "(\"yes\")",
      "f.toml:4:1: [trace] duration: wrong type: --duration takes a duration with its unit, as "
      "a string (\"12s\", \"5m\"), not an integer (12)",
      "f.toml:5:1: [trace] ringbuf_mb: wrong type: --ringbuf-mb takes an integer, not a string "
      "(\"32\")",
      "f.toml:6:1: [trace] stack_samples: wrong type: --stack-samples takes an integer, not a "
      "float (250)",
      "f.toml:7:1: [trace] max_db_size: wrong type: --max-db-size takes a size with its unit, as "
      "a string (\"500MiB\"), not an integer (2048)",
      "f.toml:8:1: [trace] node: wrong type: --node takes a string, not an integer (7)",
      "f.toml:9:1: [trace] pid: bad value: --pid: Value 0 not in range 1 to 4194304",
      "f.toml:10:1: [trace] prometheus: bad value: --prometheus: ",
      "f.toml:11:1: [trace] retain: bad value: --retain: '12' has no unit: write a duration "
      "with its unit (30m, 24h, 7d)",
      "f.toml:12:1: [trace] nice: bad value: --nice: Value -30 not in range -20 to 19",
      "f.toml:13:1: [trace] keep_all: wrong type: --keep-all takes true or false, not an "
      "integer (1)",
      "f.toml:14:1: [trace] sysfs_root: bad value: --sysfs-root: Directory does not exist: "
      "/nonexistent",
      "f.toml:15:1: [trace] db: bad value: --db: an empty path names no file",
      "f.toml:16:1: [trace] clickhouse_exit_timeout: wrong type: --clickhouse-exit-timeout takes "
      "a duration with its unit, as a string (\"5s\", \"5m\"), not an integer (5)",
      // A unit is put after a number only: it said ("trues", "5m").
      "f.toml:17:1: [trace] inflight_after: wrong type: --inflight-after takes a duration with "
      "its unit, as a string (\"5m\"), not a boolean (true)",
  };
  ASSERT_EQ(lines.size(), want.size()) << ::testing::PrintToString(lines);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(lines[i].substr(0, want[i].size()), want[i]) << lines[i];
  // The same values, typed right, pass.
  EXPECT_EQ(problem_lines("[trace]\nflush_ms = 50\nstack = false\nduration = \"12s\"\n"
                          "ringbuf_mb = 32\nmax_db_size = \"2GiB\"\nnode = \"n7\"\npid = [1]\n"
                          "retain = \"7d\"\n"
                          "clickhouse_exit_timeout = \"5s\"\n"
                          "clickhouse = \"http://127.0.0.1:8123/ingero\"\n"),
            std::vector<std::string>{});
}

// --max-db-size below 1 MiB, under which an empty trace cannot be held (its tables take ~0.6
// MiB): refused, from the file as from the command line, where 100KiB was taken, never met, and
// 98% of the calls deleted trying.
TEST(ConfigFile, AMaxDbSizeNoTraceCanMeetIsRefused) {
  EXPECT_EQ(problem_lines("[trace]\nmax_db_size = \"100KiB\"\n"),
            std::vector<std::string>{
                "f.toml:2:1: [trace] max_db_size: bad value: --max-db-size: '100KiB' is below "
                "1MiB, the least a trace can be held to (its empty tables take ~0.6 MiB)"});
  EXPECT_EQ(problem_lines("[trace]\nmax_db_size = \"1MiB\"\n"), std::vector<std::string>{});
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "trace", "--max-db-size", "1", "--db",
                               test::temp_path("never.db"), "--", "true"},
                              &out, &err),
            2);
  EXPECT_EQ(err,
            "--max-db-size: '1' is below 1MiB, the least a trace can be held to (its empty tables "
            "take ~0.6 MiB)\nRun with --help or --help-all for more information.\n");
  EXPECT_FALSE(std::filesystem::exists(test::temp_path("never.db")));
}

// `check --config /dev/zero` read without end. A config file is read up to 1 MiB; a larger
// one is refused, unread beyond that.
TEST(ConfigFile, AFileOverOneMiBIsRefusedUnread) {
  std::ostringstream out;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_config_check("/dev/zero", false, out), kExitFailure);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(out.str(),
            "/dev/zero: /dev/zero is larger than 1 MiB: a config file is a few KiB (is it the "
            "right file?)\n1 problem in /dev/zero\n");
  std::string big = write("big.toml", "[trace]\n" + std::string(1 << 20, '#') + "\n");
  std::ostringstream out2;
  EXPECT_EQ(run_config_check(big, false, out2), kExitFailure);
  EXPECT_NE(out2.str().find(big + " is larger than 1 MiB"), std::string::npos) << out2.str();
  // Applied by `trace --config`: the same refusal.
  TraceCli cli;
  try {
    cli.parse({"trace", "--config", "/dev/zero"});
    FAIL() << "/dev/zero was read as a config file";
  } catch (const CLI::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/zero is larger than 1 MiB"), std::string::npos)
        << e.what();
  }
}

TEST(ConfigFile, TheSampleIsValidAndDocumentsEveryTraceFlag) {
  std::string sample = std::string(INGERO_SOURCE_DIR) + "/deploy/ingero.toml";
  std::ostringstream out;
  EXPECT_EQ(run_config_check(sample, false, out), kExitOk) << out.str();
  std::ifstream f(sample);
  std::stringstream text;
  text << f.rdbuf();
  TraceCli cli;
  size_t flags = 0;
  for (const auto* op : cli.trace->get_options()) {
    if (op->get_lnames().empty() || !op->get_configurable() || op == cli.trace->get_help_ptr() ||
        op == cli.trace->get_help_all_ptr())
      continue;
    std::string key = op->get_lnames().front();
    std::replace(key.begin(), key.end(), '-', '_');
    std::regex line("(^|\n)#? ?" + key + " = ");
    EXPECT_TRUE(std::regex_search(text.str(), line))
        << "deploy/ingero.toml does not document --" << op->get_lnames().front() << " (add `# "
        << key << " = ...` with a comment)";
    ++flags;
  }
  EXPECT_GE(flags, 16u);  // as of this writing; more as trace grows
}

TEST(ConfigFile, FlagsOverrideTheFileAndTheFileOverridesDefaults) {
  std::string cfg = write("precedence.toml",
                          "[trace]\ndb = \"/var/lib/ingero/ingero.db\"\nringbuf_mb = 64\n"
                          "stack = false\npid = [7, 8]\n");
  TraceCli cli;
  cli.parse({"trace", "--config", cfg, "--ringbuf-mb", "8"});
  EXPECT_EQ(cli.value("--db"), "/var/lib/ingero/ingero.db");  // from the file
  EXPECT_EQ(cli.value("--ringbuf-mb"), "8");                  // the flag wins
  EXPECT_EQ(cli.trace->get_option("--stack")->as<bool>(), false);
  EXPECT_EQ(cli.trace->get_option("--pid")->as<std::vector<uint32_t>>(),
            (std::vector<uint32_t>{7, 8}));
  EXPECT_EQ(cli.value("--flush-ms"), "<unset>");  // neither: the default stays
  EXPECT_EQ(cli.trace->get_option("--flush-ms")->as<int>(), 200);

  TraceCli again;
  again.parse({"trace", "--config", cfg, "--stack"});
  EXPECT_EQ(again.trace->get_option("--stack")->as<bool>(), true);
}

TEST(ConfigFile, ApplyingABadFileThrowsEveryProblem) {
  std::string cfg = write("bad.toml", "[trace]\nringbuf_mb = 3\ncolour = 1\n");
  TraceCli cli;
  try {
    cli.parse({"trace", "--config", cfg});
    FAIL() << "a bad config file was accepted";
  } catch (const CLI::ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("2 problems in config file " + cfg), std::string::npos) << msg;
    EXPECT_NE(msg.find(cfg + ":2:1: [trace] ringbuf_mb: bad value"), std::string::npos) << msg;
    EXPECT_NE(msg.find(cfg + ":3:1: [trace] colour: unknown key"), std::string::npos) << msg;
  }
  TraceCli missing;
  EXPECT_THROW(missing.parse({"trace", "--config", "/nonexistent/ingero.toml"}),
               CLI::ValidationError);
}

TEST(ConfigFile, ToConfigRoundTrips) {
  TraceCli cli;
  cli.parse({"trace", "--ringbuf-mb", "32", "--pid", "4", "--pid", "3"});
  TomlConfig fmt(config_cli_schema);
  std::string toml = fmt.to_config(cli.app.get(), false, false, "");
  auto parsed = parse_config_text(toml, "rt.toml");
  EXPECT_TRUE(check_config(parsed, config_cli_schema).empty()) << toml;
  std::set<std::string> keys;
  for (const auto& e : parsed.entries) keys.insert(e.key + "=" + e.values.back());
  EXPECT_EQ(keys, (std::set<std::string>{"pid=3", "ringbuf_mb=32"})) << toml;
}

// A directory opens and reads as nothing, and a file that fails to read (EIO) reads as
// nothing too: neither is an empty, valid config file.
TEST(ConfigFile, ADirectoryOrAFileThatCannotBeReadIsNoValidFile) {
  std::string dir = test::temp_path("cfg.d");
  std::filesystem::create_directories(dir);
  std::ostringstream out;
  EXPECT_EQ(run_config_check(dir, false, out), kExitFailure);
  EXPECT_EQ(out.str(),
            dir + ": " + dir + " is a directory, not a config file\n1 problem in " + dir + "\n");
  std::ostringstream out2;
  EXPECT_EQ(run_config_check("/proc/self/mem", false, out2), kExitFailure);
  EXPECT_EQ(out2.str(),
            "/proc/self/mem: cannot read /proc/self/mem: Input/output error\n1 problem in "
            "/proc/self/mem\n");
  TraceCli cli;
  try {
    cli.parse({"trace", "--config", dir});
    FAIL() << "a directory was read as a config file";
  } catch (const CLI::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--config: File is actually a directory"),
              std::string::npos)
        << e.what();
  }
  TraceCli cli2;
  try {
    cli2.parse({"trace", "--config", "/proc/self/mem"});
    FAIL() << "/proc/self/mem was read as a config file";
  } catch (const CLI::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read /proc/self/mem: Input/output error"),
              std::string::npos)
        << e.what();
  }
}

TEST(ConfigFile, CheckCommandJson) {
  std::string cfg = write("json.toml", "[trace]\nnode = \"n1\"\nbogus = 1\n");
  std::ostringstream out;
  EXPECT_EQ(run_config_check(cfg, true, out), kExitFailure);
  auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["valid"], false);
  ASSERT_EQ(j["problems"].size(), 1u);
  EXPECT_EQ(j["problems"][0]["line"], 3);
  EXPECT_EQ(j["problems"][0]["key"], "bogus");
  EXPECT_EQ(j["settings"].size(), 2u);
}

TEST(ManPage, ListsEveryVisibleCommandAndTraceFlag) {
  CLI::App app{"ingero: test description"};
  Context ctx;
  add_check_command(app, ctx);
  add_trace_command(app, ctx);
  add_man_page_command(app, ctx);
  std::string page = render_man_page(app, "9.9.9");
  EXPECT_EQ(page.rfind(".TH INGERO 1 \"\" \"ingero 9.9.9\"", 0), 0u);
  EXPECT_NE(page.find(".SS \"ingero trace\""), std::string::npos);
  EXPECT_NE(page.find(".SS \"ingero check\""), std::string::npos);
  EXPECT_EQ(page.find("ingero man-page"), std::string::npos);  // hidden
  EXPECT_NE(page.find("\\fB\\-\\-ringbuf\\-mb\\fR"), std::string::npos);
  EXPECT_NE(page.find("\\fB\\-\\-config\\fR"), std::string::npos);
  EXPECT_NE(page.find("\\fB\\-\\-bench\\fR"), std::string::npos);
  // Exit statuses as cli.md gives them (helper-68: an invalid config file was said to be 1,
  // where every command that reads one exits 2, and a traced command's status was unsaid).
  EXPECT_NE(page.find(".TP\n2\nBad arguments, contradictory flags, or an invalid config file "
                      "given to a command that reads it.\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("exits with the command's status instead (128 + N when a signal N ended "
                      "it), as \\fBtime\\fR(1) does: 127 when the command is not found, 126 "
                      "when it cannot be run.\n"),
            std::string::npos)
      << page;
  // No line may start with a control character that is not a request.
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '\'') ADD_FAILURE() << line;
}

}  // namespace
}  // namespace ingero::app
