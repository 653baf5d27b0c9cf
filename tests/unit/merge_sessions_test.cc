// Issue 37, item 2: `merge a.db b.db -o m.db` then `merge m.db a.db -o m2.db`, all from one
// host, exited 0 and explain reported 130,000 calls for 80,000: a's calls counted twice. Merge
// now tells sessions apart by identity (node + start + host), keeps the identities of the
// sessions a merged file holds (merged_sessions), and refuses a session given twice.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

constexpr int64_t kT0 = 1'775'218'715'000'000'000;  // 2026-04-03 12:18:35 UTC

// One session of node "gpu-host" on host "gpu-host", started at `start`, with `calls`
// cudaMalloc calls 1 ms apart.
std::string write_session(const std::string& name, int64_t start, int calls) {
  std::string path = test::temp_path(name);
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = "gpu-host";
  si.host = "gpu-host";
  si.started_at_ns = start;
  si.mono_offset_ns = start;  // event times below are offsets from the start
  EXPECT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < calls; ++i)
    EXPECT_TRUE((*w)->add(test::runtime_call(uint64_t(i) * 1'000'000 + 1000, 10, 42, 42,
                                             hal::EventKind::kAlloc, "cudaMalloc")));
  SessionEnd end;
  end.stopped_at_ns = start + int64_t(calls) * 1'000'000 + 1'000'000;
  EXPECT_TRUE((*w)->finish(end));
  return path;
}

struct Merge {
  int rc = -1;
  std::string err;
};
Merge merge(std::vector<std::string> args) {
  args.insert(args.begin(), {INGERO_BIN, "merge"});
  Merge m;
  m.rc = test::run_command(args, nullptr, &m.err);
  return m;
}

int64_t explained_calls(const std::string& db) {
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  int64_t calls = 0;
  for (const auto& s : j["stats"]) calls += s["calls"].get<int64_t>();
  return calls;
}

std::string twice_error(const std::string& in, const std::string& other, int64_t start) {
  return "ingero merge: " + in + ": the session of node gpu-host started at " +
         (start == kT0 ? "2026-04-03 12:18:35 UTC" : "2026-04-03 12:35:15 UTC") + " (" +
         std::to_string(start) + ", host gpu-host) is also in " + other +
         ": merging both would count its calls twice. Merge tells sessions apart by node, start "
         "and host, and refuses one twice: leave one of the two files out (a merged file holds "
         "every session of the files merged into it)\n";
}

TEST(MergeSessions, AMergedFileAndOneOfItsInputsAreRefusedNotCountedTwice) {
  const int64_t t1 = kT0, t2 = kT0 + 1'000'000'000'000;  // 1,000 s later
  std::string a = write_session("a.db", t1, 500), b = write_session("b.db", t2, 300);
  std::string m = test::temp_path("m.db");
  auto r = merge({a, b, "-o", m});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "ingero merge: 800 events of 2 sessions from 2 files into " + m +
                       " (sessions told apart by node, start and host: none twice)\n");
  EXPECT_EQ(explained_calls(m), 800);
  EXPECT_EQ(test::query_rows(m, "SELECT node, host, started_at FROM merged_sessions ORDER BY 3"),
            (std::vector<std::vector<std::string>>{{"gpu-host", "gpu-host", std::to_string(t1)},
                                                   {"gpu-host", "gpu-host", std::to_string(t2)}}));

  // The repro: the merged file and one of its inputs, in either order.
  std::string m2 = test::temp_path("m2.db");
  r = merge({m, a, "-o", m2});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, twice_error(a, m, t1));
  EXPECT_FALSE(std::filesystem::exists(m2));
  r = merge({b, m, "-o", m2});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, twice_error(m, b, t2));
  EXPECT_FALSE(std::filesystem::exists(m2));

  // A merged file of a merged file keeps every source session: still refused three levels down.
  std::string c = write_session("c.db", t2 + 1'000'000'000'000, 200);
  std::string m3 = test::temp_path("m3.db");
  r = merge({m, c, "-o", m3});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(explained_calls(m3), 1000);
  EXPECT_EQ(test::query_int(m3, "SELECT count(*) FROM merged_sessions"), 3);
  r = merge({m3, b, "-o", m2});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, twice_error(b, m3, t2));

  // The same file twice, or a copy of it.
  r = merge({a, a, "-o", m2});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, twice_error(a, a, t1));
  std::string copy = test::temp_path("a-copy.db");
  std::filesystem::copy_file(a, copy);
  r = merge({a, copy, "-o", m2});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, twice_error(copy, a, t1));
  EXPECT_FALSE(std::filesystem::exists(m2));
}

// Two sessions of one file count once each; the same node and host at another start is
// another session.
TEST(MergeSessions, SessionsAppendedToOneFileAreEachMergedOnce) {
  std::string a = write_session("a.db", kT0, 100);
  {
    auto w = TraceWriter::open(a);
    ASSERT_TRUE(w) << w.error().message;
    SessionInfo si;
    si.node = "gpu-host";
    si.host = "gpu-host";
    si.started_at_ns = kT0 + 500'000'000'000;
    si.mono_offset_ns = si.started_at_ns;
    ASSERT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < 40; ++i)
      ASSERT_TRUE((*w)->add(test::runtime_call(uint64_t(i) * 1'000'000 + 1000, 10, 42, 42,
                                               hal::EventKind::kAlloc, "cudaMalloc")));
    ASSERT_TRUE((*w)->finish({}));
  }
  std::string b = write_session("b.db", kT0 + 1'000'000'000'000, 60);
  std::string m = test::temp_path("m.db");
  auto r = merge({a, b, "-o", m});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "ingero merge: 200 events of 3 sessions from 2 files into " + m +
                       " (sessions told apart by node, start and host: none twice)\n");
  EXPECT_EQ(explained_calls(m), 200);
  EXPECT_EQ(test::query_int(m, "SELECT count(*) FROM merged_sessions"), 3);
}

}  // namespace
}  // namespace ingero::store
