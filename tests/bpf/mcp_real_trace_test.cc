// MCP on a trace this test records: the real CUDA runtime and driver stub, HIP and NCCL, the
// fake runtime's CUDA graph lifecycle, and a fake InfiniBand tree. The official TypeScript SDK
// calls every tool over stdio and over HTTP, and the answers are checked against SQL.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/http_client.h"
#include "tests/support/mcp_sdk.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Json = nlohmann::json;

const char* kHip = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const char* kNccl = INGERO_CUDA_ROOT "/lib64/libnccl.so.2";

// Records the trace once for all tests here.
class McpRealTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why;
    if (!bpf_available(&why) || !mcp_sdk_unavailable().empty()) return;
    for (const char* f : {INGERO_CUDA_CALLS, INGERO_STACK_CALLS, kHip, kNccl, kStub})
      if (access(f, R_OK) != 0) return;
    dir_ = new std::string(temp_path("mcp-real"));
    std::filesystem::create_directories(*dir_);
    std::string port = *dir_ + "/sys/class/infiniband/mlx5_0/ports/1";
    std::filesystem::create_directories(port + "/counters");
    std::ofstream(port + "/link_layer") << "InfiniBand\n";
    std::ofstream(port + "/state") << "4: ACTIVE\n";
    std::ofstream(port + "/counters/port_rcv_data") << "2500\n";
    std::ofstream(port + "/counters/symbol_error") << "9\n";
    const std::string& d = *dir_;
    std::string script = std::string(INGERO_CUDA_CALLS) + " " + kStub + " > " + d + "/cuda.out; " +
                         INGERO_HIP_CALLS + " " + kHip + " > " + d + "/hip.out; " +
                         INGERO_NCCL_CALLS + " " + kNccl + " > " + d + "/nccl.out; " +
                         INGERO_FAKE_CALLS + " graphs " + INGERO_FAKE_CUDART + " > " + d +
                         "/graphs.out; " + INGERO_STACK_CALLS + " > " + d + "/stack.out";
    db_ = new std::string(d + "/real.db");
    auto run = trace_command(*db_, {"/bin/sh", "-c", script}, {"--sysfs-root", d + "/sys"},
                             {"VIRTUAL_ENV=" INGERO_FAKE_VENV, "CUDA_HOME=" INGERO_FAKE_CUDA_HOME});
    trace_rc_ = run.rc;
    trace_err_ = new std::string(run.err);
  }
  void SetUp() override {
    REQUIRE_BPF();
    REQUIRE_MCP_SDK();
    for (const char* f : {INGERO_CUDA_CALLS, INGERO_STACK_CALLS, kHip, kNccl, kStub})
      REQUIRE_FILE(f);
    ASSERT_NE(db_, nullptr);
    ASSERT_EQ(trace_rc_, 0) << *trace_err_;
  }
  static int graphs_pid() { return printed(*dir_ + "/graphs.out", "pid"); }
  // "KEY N" lines a workload printed.
  static int printed(const std::string& file, const std::string& key) {
    std::ifstream in(file);
    std::string word;
    int v = 0;
    while (in >> word >> v)
      if (word == key) return v;
    return 0;
  }
  static std::string* dir_;
  static std::string* db_;
  static std::string* trace_err_;
  static int trace_rc_;
};
std::string* McpRealTrace::dir_ = nullptr;
std::string* McpRealTrace::db_ = nullptr;
std::string* McpRealTrace::trace_err_ = nullptr;
int McpRealTrace::trace_rc_ = -1;

const std::string kArgs =
    R"({"get_stacks":{"op":"cudaMalloc","limit":20},"run_sql":{"sql":"SELECT count(*) FROM calls WHERE vendor = 'amd'"},"run_demo":{"scenario":"graph-recapture"},"get_trace_stats":{"limit":200},"get_causal_chains":{"limit":50}})";

void check(const Json& r, const std::string& db, int graphs_pid, int stack_pid, int alloc_line) {
  ASSERT_FALSE(r.contains("fatal")) << r["fatal"];
  EXPECT_EQ(r["schemaErrors"], Json::array());
  for (auto it = r["results"].begin(); it != r["results"].end(); ++it) {
    EXPECT_FALSE(it.value().contains("exception")) << it.key() << ": " << it.value()["exception"];
    EXPECT_EQ(it.value()["isError"], false) << it.key() << ": " << it.value()["text"];
  }
  const Json& res = r["results"];
  // Stats: every (vendor, op) of the workloads, exact counts and errors.
  std::map<std::string, std::pair<int64_t, int64_t>> want, got;
  for (const auto& row :
       query_rows(db,
                  "SELECT vendor || '/' || op, count(*), coalesce(sum(ret != 0), 0) FROM calls "
                  "GROUP BY 1"))
    want[row[0]] = {std::stoll(row[1]), std::stoll(row[2])};
  for (const auto& op : res["get_trace_stats"]["structured"]["ops"])
    got[op["vendor"].get<std::string>() + "/" + op["op"].get<std::string>()] = {op["calls"],
                                                                                op["errors"]};
  EXPECT_EQ(got, want);
  EXPECT_TRUE(got.count("amd/hipMalloc") && got.count("nvidia/cudaMalloc") &&
              got.count("nvidia/ncclAllReduce"));
  // Graphs: 5 executable graphs; A launched 40 times, the re-captured A 10 times, 3 never.
  const Json& g = res["graph_lifecycle"]["structured"];
  ASSERT_EQ(g["graphs"].size(), 5u) << res["graph_lifecycle"]["text"];
  std::vector<int64_t> launches;
  for (const auto& e : g["graphs"]) launches.push_back(e["launches"]);
  EXPECT_EQ(launches, (std::vector<int64_t>{40, 0, 0, 0, 10}));
  Json gp;
  for (const auto& p : g["processes"])
    if (p["pid"] == graphs_pid) gp = p;
  ASSERT_TRUE(gp.is_object()) << res["graph_lifecycle"]["text"];
  EXPECT_EQ(gp["failed_instantiations"], 1);
  EXPECT_EQ(gp["captures"], 5);
  EXPECT_EQ(gp["instantiations"], 5);
  EXPECT_EQ(gp["launches"], 50);
  for (const auto& e : g["graphs"]) EXPECT_EQ(e["pid"], graphs_pid);
  int64_t sum = 0;
  for (const auto& b : res["graph_frequency"]["structured"]["timeline"])
    sum += b["launches"].get<int64_t>();
  EXPECT_EQ(sum, 50);
  // Collectives: ranks and calls as recorded.
  int64_t coll = query_int(db, "SELECT count(*) FROM calls WHERE kind = 'collective'");
  int64_t got_coll = 0;
  for (const auto& grp : res["get_collectives"]["structured"]["groups"])
    for (const auto& rk : grp["ranks"]) got_coll += rk["calls"].get<int64_t>();
  EXPECT_EQ(got_coll, coll);
  EXPECT_GT(coll, 0);
  // RDMA: the fake tree's counters, words converted to bytes.
  std::map<std::string, int64_t> rd;
  for (const auto& c : res["get_rdma_counters"]["structured"]["counters"])
    rd[c["counter"]] = c["last_value"];
  EXPECT_EQ(rd, (std::map<std::string, int64_t>{{"port_rcv_data", 10000}, {"symbol_error", 9}}));
  // The trace's own health, as stored.
  const Json& s = res["get_check"]["structured"]["trace"]["sessions"][0];
  EXPECT_EQ(s["ringbuf_drops"], 0);
  EXPECT_EQ(s["events_stored"].get<int64_t>(), query_int(db, "SELECT events_stored FROM sessions"));
  EXPECT_EQ(res["run_sql"]["structured"]["rows"][0][0].get<int64_t>(),
            query_int(db, "SELECT count(*) FROM calls WHERE vendor = 'amd'"));
  // Stacks (captured by default): every cudaMalloc has one, and stack_calls' five calls share
  // one stack whose innermost user frame is alloc_weights at the line the program printed.
  const Json& st = res["get_stacks"]["structured"];
  ASSERT_EQ(st["captured"], true) << res["get_stacks"]["text"];
  EXPECT_EQ(st["calls"].get<int64_t>(),
            query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaMalloc'"));
  EXPECT_EQ(
      st["calls_with_stack"].get<int64_t>(),
      query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaMalloc' AND stack_hash != 0"));
  Json alloc;
  for (const auto& s : st["stacks"])
    for (const auto& f : s["frames"])
      if (f["function"] == "alloc_weights") alloc = s;
  ASSERT_TRUE(alloc.is_object()) << res["get_stacks"]["text"];
  EXPECT_EQ(alloc["calls"], 5);
  EXPECT_EQ(alloc["pids"], 1);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE op = 'cudaMalloc' AND pid = " +
                              std::to_string(stack_pid) + " AND printf('%016x', stack_hash) = '" +
                              alloc["hash"].get<std::string>() + "'"),
            5);
  bool at_line = false;
  for (const auto& f : alloc["frames"])
    if (f["function"] == "alloc_weights")
      at_line = f["file"] == INGERO_STACK_CALLS_SRC && f["line"] == alloc_line;
  EXPECT_TRUE(at_line) << alloc.dump();
}

TEST_F(McpRealTrace, StdioEveryTool) {
  std::string before = sha256_file(*db_);
  check(run_mcp_sdk({"tools", "--ingero", INGERO_BIN, "--db", *db_, "--args", kArgs}), *db_,
        graphs_pid(), printed(*dir_ + "/stack.out", "pid"),
        printed(*dir_ + "/stack.out", "alloc_line"));
  EXPECT_EQ(sha256_file(*db_), before);
}

TEST_F(McpRealTrace, HttpEveryTool) {
  int port = free_tcp_port();
  auto server = Subprocess::spawn(
      {INGERO_BIN, "mcp", "--db", *db_, "--http", "127.0.0.1:" + std::to_string(port)});
  ASSERT_TRUE(server.wait_stderr_line("serving", std::chrono::seconds(20))) << server.err();
  check(run_mcp_sdk({"tools", "--url", "http://127.0.0.1:" + std::to_string(port) + "/mcp",
                     "--args", kArgs}),
        *db_, graphs_pid(), printed(*dir_ + "/stack.out", "pid"),
        printed(*dir_ + "/stack.out", "alloc_line"));
  server.signal(SIGINT);
  EXPECT_EQ(server.wait(std::chrono::seconds(20)), 0);
}

}  // namespace
}  // namespace ingero::test
