// Trace files of schema 9 and before (calls as rows of `events`, folded into `call_runs`,
// archived in `call_blocks`/`run_blocks`, copies in `recent_blocks`) read as the last build
// that wrote them read them, byte for byte (tests/fixtures/legacy/README.md); `compact`
// converts one to schema 10 keeping every call; writing into one is refused with the way out.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "app/builtin_backends.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kLegacy[] = {"v7-runs", "v8-archived", "v9-traced", "v9-traced-compacted"};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The fixture decompressed into this test's directory, under its own name (explain prints it).
std::string unpack(const std::string& name) {
  std::string dir = temp_path(name);
  std::filesystem::create_directories(dir);
  std::string out = dir + "/" + name + ".db";
  EXPECT_TRUE(unpack_fixture("legacy/" + name, out)) << name;
  return out;
}

// `ingero ARGS...` run in `dir` (no argument holds a single quote): its stdout (stderr
// dropped), and its exit status.
std::string ingero(const std::vector<std::string>& args, const std::string& dir, int* rc) {
  std::string cmd = "cd '" + dir + "' && exec '" INGERO_BIN "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  std::string out;
  *rc = run_command({"sh", "-c", cmd}, &out);
  return out;
}

TEST(LegacySchema, ExplainAndQueriesGiveWhatTheBuildThatWroteThemGave) {
  std::string queries = slurp(INGERO_FIXTURES_DIR "/legacy/queries.txt");
  for (const char* name : kLegacy) {
    std::string db = unpack(name);
    std::string dir = std::filesystem::path(db).parent_path();
    std::string file = std::filesystem::path(db).filename();
    int rc = 0;
    EXPECT_EQ(ingero({"explain", "--db", file, "--json"}, dir, &rc),
              slurp(INGERO_FIXTURES_DIR "/legacy/" + std::string(name) + ".explain.json"))
        << name;
    EXPECT_EQ(rc, 0) << name;
    std::string got;
    std::istringstream lines(queries);
    for (std::string q; std::getline(lines, q);) {
      got += ingero({"query", "--db", file, "--json", q}, dir, &rc);
      got += "\n";
    }
    // Compared as JSON: the values are what the older build gave; the keys' order is the
    // statement's now (the golden files have them sorted, as --json wrote them then).
    auto parsed = [](const std::string& text) {
      std::vector<nlohmann::json> v;
      std::istringstream in(text);
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) v.push_back(nlohmann::json::parse(line));
      return v;
    };
    EXPECT_EQ(parsed(got),
              parsed(slurp(INGERO_FIXTURES_DIR "/legacy/" + std::string(name) + ".queries.json")))
        << name;
  }
}

TEST(LegacySchema, WritingIntoAnOlderFileIsRefusedWithTheWayOut) {
  std::string db = unpack("v8-archived");
  std::string before = sha256_file(db);
  auto w = store::TraceWriter::open(db, app::builtin_views());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message.find("schema 9"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("ingero compact " + db), std::string::npos) << w.error().message;
  EXPECT_EQ(sha256_file(db), before);
}

// An older file whose calls are all rows converts with every call, its summaries and chains:
// the real H100 ResNet trace of schema 4.
TEST(LegacySchema, CompactConvertsAnOlderFileKeepingEveryCall) {
  std::string dir = temp_path("convert");
  std::filesystem::create_directories(dir);
  std::string db = dir + "/resnet-clean.db";
  ASSERT_TRUE(unpack_fixture("h100/resnet-clean", db));
  int64_t calls = query_int(db, "SELECT count(*) FROM calls");
  auto ops = query_rows(db, "SELECT op, count(*) FROM calls GROUP BY op ORDER BY op");
  const char* host_sql =
      "SELECT source, op, count(*), sum(duration), sum(pid + tid), count(detail) FROM events "
      "WHERE source IN (3, 5, 6) GROUP BY source, op ORDER BY source, op";
  auto host = query_rows(db, host_sql);
  ASSERT_GT(host.size(), 1u);
  int rc = 0;
  std::string before = ingero({"explain", "--db", "resnet-clean.db"}, dir, &rc);
  ASSERT_EQ(rc, 0);
  // Neither compact's umask nor the new file's 0600: the file's own mode.
  std::filesystem::permissions(db, std::filesystem::perms(0640));
  std::string out = ingero({"compact", "resnet-clean.db"}, dir, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("converted to schema 11"), std::string::npos) << out;
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 11);
  EXPECT_EQ(std::filesystem::status(db).permissions(), std::filesystem::perms(0640));
  // Every host event, in blocks now (host_rows is their view).
  EXPECT_EQ(query_rows(db, host_sql), host);
  EXPECT_GT(query_int(db, "SELECT count(*) FROM host_store"), 0);
  // Every call counted by the summaries, kept as a row or in a run.
  EXPECT_EQ(query_int(db, "SELECT sum(calls) FROM call_summaries"), calls);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls") +
                query_int(db, "SELECT coalesce(sum(calls), 0) FROM call_runs"),
            calls);
  EXPECT_EQ(query_rows(db, "SELECT op, sum(calls) FROM call_summaries GROUP BY op ORDER BY op"),
            ops);
  // explain's chains are those of the file it was (the figures of folded calls within the
  // sketches' bound): the first chain word for word.
  std::string after = ingero({"explain", "--db", "resnet-clean.db"}, dir, &rc);
  auto first_chain = [](const std::string& s) {
    size_t at = s.find("\n[");
    return at == std::string::npos ? std::string() : s.substr(at, s.find('\n', at + 1) - at);
  };
  ASSERT_FALSE(first_chain(before).empty());
  EXPECT_EQ(first_chain(after), first_chain(before));
}

// A schema 9 file folded while tracing keeps copies of its folded calls' rows, and the
// reader's `call_runs` leaves those runs out: compact tried to convert it and merge to copy it,
// both read only its rows, and both said "damaged: 53661 calls ... were not read" with a
// quick_check hint. It is a file of folded runs, as its siblings are, and said so. The count
// is of every run the file holds (v9-traced-compacted's reader shows 1,493 of its 3,007: the
// rest stand beside copies of their calls' rows).
TEST(LegacySchema, EveryOlderFoldedFileIsLeftByCompactAndRefusedByMerge) {
  const std::pair<const char*, int> runs[] = {
      {"v7-runs", 1596}, {"v8-archived", 1596}, {"v9-traced", 3007}, {"v9-traced-compacted", 3007}};
  for (const auto& [name, n] : runs) {
    std::string db = unpack(name);
    std::string dir = std::filesystem::path(db).parent_path();
    std::string file = std::string(name) + ".db";
    std::string before = sha256_file(db);
    std::string out, err;
    EXPECT_EQ(run_command({"sh", "-c", "cd '" + dir + "' && exec '" INGERO_BIN "' compact " + file},
                          &out, &err),
              0)
        << name;
    EXPECT_EQ(out, "ingero compact: " + file + ": schema 9, whose launches an earlier ingero " +
                       "already folded (" + std::to_string(n) +
                       " runs): left as it is (every ingero command reads it; traces written "
                       "from now on are schema 11)\n");
    EXPECT_EQ(err, "") << name;
    EXPECT_EQ(sha256_file(db), before) << name;
    EXPECT_EQ(run_command({INGERO_BIN, "merge", db, "-o", dir + "/merged.db"}, &out, &err), 1)
        << name;
    EXPECT_EQ(err,
              "ingero merge: " + db + ": " + std::to_string(n) +
                  " runs of folded launches (tiered retention); merge keeps every call's "
                  "row, so it takes traces recorded with --keep-all or before folding began\n");
    EXPECT_FALSE(std::filesystem::exists(dir + "/merged.db")) << name;
  }
}

// Converting an older file on a full disk named its temporary copy (in a private folder already
// gone) and said nothing of the room it needs.
TEST(LegacySchema, ConvertingOnAFullDiskSaysWhatItNeedsAndLeavesTheFile) {
  std::string mnt = temp_path("full-convert");
  std::filesystem::create_directories(mnt);
  std::string db = mnt + "/resnet-clean.db";
  std::string out, err;
  int rc = run_on_full_tmpfs(mnt, "20m",
                             "xz -dc '" INGERO_FIXTURES_DIR "/h100/resnet-clean.db.xz' > " + db +
                                 "; sum=$(sha256sum < " + db + ")",
                             64,
                             std::string(INGERO_BIN) + " compact " + db +
                                 "; echo \"rc=$?\"; [ \"$(sha256sum < " + db +
                                 ")\" = \"$sum\" ] && echo same; ls -A " + mnt,
                             &out, &err);
  if (rc == kNoTmpfs) {
    if (running_in_ci()) FAIL() << "CI=true but no private tmpfs mount: " << err;
    GTEST_SKIP() << "*** SKIPPED: cannot mount a tmpfs in a user namespace: " << err << " ***";
  }
  EXPECT_EQ(out, "rc=1\nsame\nfiller\nresnet-clean.db\n") << err;
  EXPECT_EQ(err, "ingero compact: " + db +
                     ": converting to schema 11: creating the trace's tables failed: database or "
                     "disk is full: converting writes a copy beside the file and needs free space "
                     "about its size; the file is as it was: run it again once there is room\n");
}

}  // namespace
}  // namespace ingero::test
