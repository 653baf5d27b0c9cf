// A merged file is analysed node by node: each node's report covers its own events and losses.
// Each node's window was the whole file's (the time span ignored the node), so a node that
// traced for one second of a three-second fleet trace said it covered three, and its rates were
// divided by the fleet's duration; and each node reported every node's losses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

constexpr int64_t kBase = 1'700'000'000'000'000'000;

// `n` cudaFree calls of 10 us, 1 ms apart from `start_ms`; the session ends with `lost`.
void write_node(const std::string& path, const std::string& node, int64_t start_ms, int n,
                const SessionCounters& lost = {}, const std::string& name = "") {
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = node;
  si.mono_offset_ns = kBase;
  ASSERT_TRUE((*w)->begin_session(si));
  if (!name.empty()) {
    ASSERT_TRUE((*w)->on_process(42, name, name + " --rank", kBase));
  }
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE((*w)->add(test::runtime_call(uint64_t((start_ms + i) * 1'000'000), 10'000, 42, 42,
                                             hal::EventKind::kFree, "cudaFree")));
  }
  SessionEnd end;
  end.counters = lost;
  ASSERT_TRUE((*w)->finish(end));
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

// And its own processes' names: pid 42 is "alpha" on node-a and "beta" on node-b. Every node's
// report named its processes from the whole file's names, one node's taking the other's.
TEST(MergedNodes, EachNodeNamesItsOwnProcesses) {
  std::string a = test::temp_path("names-a.db"), b = test::temp_path("names-b.db");
  write_node(a, "node-a", 0, 200, {}, "alpha");
  write_node(b, "node-b", 0, 200, {}, "beta");
  std::string merged = test::temp_path("names.db"), out, err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", merged}, nullptr, &err), 0) << err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", merged}, &out, &err), 0) << err;
  size_t at_b = out.find("[node node-b]");
  ASSERT_NE(at_b, std::string::npos) << out;
  const std::string node_a = out.substr(0, at_b), node_b = out.substr(at_b);
  EXPECT_NE(node_a.find("  alpha (pid 42): "), std::string::npos) << node_a;
  EXPECT_EQ(node_a.find("beta"), std::string::npos) << node_a;
  EXPECT_NE(node_b.find("  beta (pid 42): "), std::string::npos) << node_b;
  EXPECT_EQ(node_b.find("alpha"), std::string::npos) << node_b;
}

// And its own losses: a node that lost nothing said it lost what the other nodes lost.
TEST(MergedNodes, EachNodeKeepsItsOwnLosses) {
  std::string a = test::temp_path("node-a.db"), b = test::temp_path("node-b.db");
  SessionCounters lost;
  lost.call_drops = 5;
  lost.lost_calls = 2;
  write_node(a, "node-a", 0, 100, lost);
  write_node(b, "node-b", 0, 100);
  std::string merged = test::temp_path("merged.db"), err, text;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", merged}, nullptr, &err), 0) << err;
  nlohmann::json m = explain(merged);
  ASSERT_EQ(m["nodes"].size(), 2u) << m.dump().substr(0, 2000);
  EXPECT_EQ(m["nodes"][0]["losses"], explain(a)["losses"]);
  EXPECT_EQ(m["nodes"][0]["losses"]["calls_lost"], 7);
  EXPECT_EQ(m["nodes"][1]["losses"], explain(b)["losses"]);
  EXPECT_EQ(m["nodes"][1]["losses"]["calls_lost"], 0);
  EXPECT_EQ(m["losses"]["calls_lost"], 7);  // the whole trace's
  // In the text, only node-a's report says so.
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", merged}, &text, &err), 0) << err;
  size_t node_b = text.find("[node node-b]");
  ASSERT_NE(node_b, std::string::npos) << text;
  EXPECT_NE(text.substr(0, node_b).find("7 calls lost"), std::string::npos) << text;
  EXPECT_EQ(text.substr(node_b).find("calls lost"), std::string::npos) << text;
}

}  // namespace
}  // namespace ingero::store
