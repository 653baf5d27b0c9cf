// A merged file is analysed node by node: each node's report covers its own events. Each
// node's window was the whole file's (the time span ignored the node), so a node that traced
// for one second of a three-second fleet trace said it covered three, and its rates were
// divided by the fleet's duration.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

constexpr int64_t kBase = 1'700'000'000'000'000'000;

// `n` cudaFree calls of 10 us, 1 ms apart from `start_ms`.
void write_node(const std::string& path, const std::string& node, int64_t start_ms, int n) {
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = node;
  si.mono_offset_ns = kBase;
  ASSERT_TRUE((*w)->begin_session(si));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE((*w)->add(test::runtime_call(uint64_t((start_ms + i) * 1'000'000), 10'000, 42, 42,
                                             hal::EventKind::kFree, "cudaFree")));
  }
  ASSERT_TRUE((*w)->finish(SessionEnd{}));
}

nlohmann::json explain(const std::string& db) {
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  return nlohmann::json::parse(out, nullptr, false);
}

TEST(MergedNodes, EachNodeKeepsItsOwnWindow) {
  std::string a = test::temp_path("node-a.db"), b = test::temp_path("node-b.db");
  write_node(a, "node-a", 0, 3000);     // 0 to 3 s
  write_node(b, "node-b", 1000, 1000);  // 1 to 2 s
  std::string merged = test::temp_path("merged.db"), err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", merged}, nullptr, &err), 0) << err;
  nlohmann::json m = explain(merged);
  ASSERT_EQ(m["nodes"].size(), 2u) << m.dump().substr(0, 2000);
  const nlohmann::json alone[] = {explain(a), explain(b)};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(m["nodes"][i]["window"], alone[i]["window"]) << m["nodes"][i]["node"];
    EXPECT_EQ(m["nodes"][i]["events"], alone[i]["events"]);
  }
  EXPECT_EQ(m["nodes"][1]["window"]["start_ns"], kBase + 1'000'000'000);
  EXPECT_EQ(m["nodes"][1]["window"]["end_ns"], kBase + 1'999'010'000);
  // The fleet's window spans both.
  EXPECT_EQ(m["window"]["start_ns"], kBase);
  EXPECT_EQ(m["window"]["end_ns"], kBase + 2'999'010'000);
}

}  // namespace
}  // namespace ingero::store
