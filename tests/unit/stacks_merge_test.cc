// Stacks survive `ingero merge`: our stack_frames from two nodes (one stack shared, stored
// once), and the original implementation's stack_traces, both behind the one `stacks` view.
#include <gtest/gtest.h>

#include <set>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using V = std::vector<std::string>;

hal::StackFrame native(std::string fn, std::string file, int line, uint64_t off) {
  hal::StackFrame f;
  f.module = "/opt/train/bin/trainer";
  f.module_offset = off;
  f.build_id = "ab12";
  f.function = std::move(fn);
  f.file = std::move(file);
  f.line = line;
  return f;
}

hal::StackFrame python(std::string fn, std::string file, int line) {
  hal::StackFrame f;
  f.python = true;
  f.function = std::move(fn);
  f.file = std::move(file);
  f.line = line;
  return f;
}

// One node's trace: `calls` cudaMalloc calls, call i naming stacks[i % stacks.size()].
void write_node(const std::string& path, const std::string& node,
                const std::vector<std::pair<uint64_t, std::vector<hal::StackFrame>>>& stacks,
                int calls) {
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = node;
  ASSERT_TRUE((*w)->begin_session(si));
  for (const auto& [id, frames] : stacks) ASSERT_TRUE((*w)->add_stack(id, frames));
  for (int i = 0; i < calls; ++i) {
    hal::Event e =
        test::runtime_call(1000 + uint64_t(i), 10, 7, 7, hal::EventKind::kAlloc, "cudaMalloc");
    e.stack_id = stacks[size_t(i) % stacks.size()].first;
    ASSERT_TRUE((*w)->add(e));
  }
  ASSERT_TRUE((*w)->finish({}));
}

TEST(StacksMerge, OurStacksFromTwoNodesAreKeptAndSharedOnesStoredOnce) {
  const uint64_t shared = 0x1111, only_b = 0x2222;
  std::vector<hal::StackFrame> s1 = {native("alloc_weights", "/src/train.c", 41, 0x1189),
                                     python("forward", "/src/train.py", 142),
                                     python("<module>", "/src/train.py", 200)};
  std::vector<hal::StackFrame> s2 = {native("", "", 0, 0x2000)};  // unresolved: kept as offset
  std::string a = test::temp_path("node-a.db"), b = test::temp_path("node-b.db");
  write_node(a, "node-a", {{shared, s1}}, 3);
  write_node(b, "node-b", {{shared, s1}, {only_b, s2}}, 4);
  std::string merged = test::temp_path("merged-stacks.db"), err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", merged}, nullptr, &err), 0) << err;

  EXPECT_EQ(test::query_rows(merged, "SELECT stack_id, count(*) FROM stacks GROUP BY 1 ORDER BY 1"),
            (std::vector<V>{{std::to_string(shared), "3"}, {std::to_string(only_b), "1"}}));
  EXPECT_EQ(
      test::query_rows(merged, "SELECT frame, location FROM stacks WHERE stack_id = " +
                                   std::to_string(shared) + " ORDER BY frame"),
      (std::vector<V>{{"0", "alloc_weights at /src/train.c:41 (/opt/train/bin/trainer+0x1189)"},
                      {"1", "[Python] /src/train.py:142 in forward()"},
                      {"2", "[Python] /src/train.py:200 in <module>()"}}));
  EXPECT_EQ(test::query_rows(merged,
                             "SELECT location, address, build_id FROM stacks WHERE "
                             "stack_id = " +
                                 std::to_string(only_b)),
            (std::vector<V>{
                {"?? (/opt/train/bin/trainer+0x2000)", "/opt/train/bin/trainer+0x2000", "ab12"}}));
  // Every call still finds its stack: node a's 3 and node b's 2 + 2.
  EXPECT_EQ(
      test::query_rows(merged,
                       "SELECT c.node, s.stack_id, count(*) FROM calls c JOIN stacks s ON "
                       "s.stack_id = c.stack_hash AND s.frame = 0 GROUP BY 1, 2 ORDER BY 1, 2"),
      (std::vector<V>{{"node-a", std::to_string(shared), "3"},
                      {"node-b", std::to_string(shared), "2"},
                      {"node-b", std::to_string(only_b), "2"}}));
}

// The original implementation's node files: the merged file's stacks view holds the union of
// theirs by stack (its hash names the code path; one stack seen on two nodes differs only in
// raw, ASLR-shifted addresses and is stored once), and their calls keep finding their stacks.
TEST(StacksMerge, LegacyStackTracesStayVisibleThroughTheStacksView) {
  std::string dir = INGERO_FIXTURES_DIR "/ingero-go/";
  std::vector<std::string> nodes;
  for (int i = 1; i <= 3; ++i)
    nodes.push_back(dir + "sample-gpu-node-0" + std::to_string(i) + ".db");
  std::set<V> want_frames, any_location;
  int64_t joined = 0;
  const std::string frames_sql = "SELECT stack_id, frame, kind, function FROM stacks";
  const std::string location_sql = "SELECT stack_id, frame, location FROM stacks";
  const std::string join_sql =
      "SELECT count(*) FROM calls c JOIN stacks s ON s.stack_id = c.stack_hash AND s.frame = 0";
  for (const auto& n : nodes) {
    for (auto& r : test::query_rows(n, frames_sql)) want_frames.insert(r);
    for (auto& r : test::query_rows(n, location_sql)) any_location.insert(r);
    joined += test::query_int(n, join_sql);
  }
  ASSERT_GT(want_frames.size(), 10u);
  ASSERT_GT(joined, 0);
  std::string merged = test::temp_path("merged-legacy-stacks.db"), err;
  std::vector<std::string> argv = {INGERO_BIN, "merge"};
  argv.insert(argv.end(), nodes.begin(), nodes.end());
  argv.push_back("-o");
  argv.push_back(merged);
  ASSERT_EQ(test::run_command(argv, nullptr, &err), 0) << err;
  auto got = test::query_rows(merged, frames_sql);
  EXPECT_EQ(std::set<V>(got.begin(), got.end()), want_frames);
  EXPECT_EQ(got.size(), want_frames.size());  // each stack once
  for (const auto& r : test::query_rows(merged, location_sql))
    EXPECT_TRUE(any_location.count(r)) << r[0] << " " << r[1] << " " << r[2];
  EXPECT_EQ(test::query_int(merged, join_sql), joined);
}

}  // namespace
}  // namespace ingero::store
