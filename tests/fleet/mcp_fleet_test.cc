// MCP over a fleet (issue 40): `ingero mcp --source clickhouse://...` driven by the official MCP
// TypeScript SDK over stdio, on two nodes' trace files shipped to a real ClickHouse. Each node
// holds 30 calls and the in-flight rows of a 4-rank collective hang: ranks 0 and 1 (node-1) and
// rank 2 (node-2) inside ncclAllReduce #7, rank 3 (node-2) idle. The SDK lists the tools and
// calls get_trace_stats, get_causal_chains and get_inflight: counts over both nodes, the chains
// `explain --source` finds, and every stuck thread with its node.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fleet/shipper.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/mcp_sdk.h"

namespace ingero::test {
namespace {

using Json = nlohmann::json;
constexpr int64_t kSec = 1'000'000'000;
constexpr uint64_t kComm = 0xfeed;

struct Rank {
  uint32_t pid;
  uint64_t rank;
  bool inside;  // else idle: outside any call
};

// A node's file: 30 calls (write_session's), then its ranks' in-flight rows, as the tracer
// writes them.
void write_node(const std::string& path, const std::string& node, int64_t start,
                const std::vector<Rank>& ranks) {
  write_session(path, node, start, 30, 10'000'000);
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = node;
  si.host = node;
  si.started_at_ns = start + 60 * kSec;
  si.mono_offset_ns = start;  // mono 0 = the first session's start
  si.flags = "inflight-after=2";
  ASSERT_TRUE((*w)->begin_session(si));
  hal::InflightReport rep;
  for (const Rank& r : ranks) {
    hal::Inflight in;
    in.what = r.inside ? hal::Inflight::What::kCall : hal::Inflight::What::kIdle;
    hal::Event& e = in.call;
    e.pid = e.tid = r.pid;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "nccl";
    if (r.inside) {
      e.op = "ncclAllReduce";
      e.kind = hal::EventKind::kCollective;
    }
    e.ts_ns = uint64_t(61 * kSec);
    e.dur_ns = uint64_t(30 * kSec);
    e.set(hal::Field::kCommHash, kComm);
    e.set(hal::Field::kRank, r.rank);
    e.set(hal::Field::kNranks, 4);
    e.set(hal::Field::kCommunicator, 0x7000 + r.rank);
    in.seq = 7;
    in.reported_ns = uint64_t(63 * kSec);
    in.seen_ns = uint64_t(91 * kSec);
    in.state = hal::ThreadState::kSleeping;
    rep.current.push_back(in);
    rep.changed.push_back(true);
  }
  ASSERT_TRUE((*w)->on_inflight(rep));
  ASSERT_TRUE((*w)->commit());
}

void ship(const ClickHouseServers& ch, const std::string& file) {
  auto s = fleet::Shipper::create(file, endpoint(ch, 0, "ingero"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE((*s)->drain(std::chrono::seconds(60)).caught_up);
}

// run_sql's statement over the fleet: ClickHouse's own SQL and tables.
const std::string kNodeSql = "SELECT node, count() AS calls FROM calls GROUP BY node ORDER BY node";

TEST(FleetMcp, SdkClientAnswersOverTwoNodes) {
  REQUIRE_MCP_SDK();
  START_SERVERS(ch, 1);
  const int64_t start = 1'760'000'000 * kSec;
  std::string f1 = temp_path("mcp-node-1.db"), f2 = temp_path("mcp-node-2.db");
  write_node(f1, "node-1", start, {{5001, 0, true}, {5002, 1, true}});
  write_node(f2, "node-2", start, {{6001, 2, true}, {6002, 3, false}});
  ship(ch, f1);
  ship(ch, f2);
  const std::string source = ch.source(0, "ingero");

  auto r =
      run_mcp_sdk({"call", "--ingero", INGERO_BIN, "--source", source, "--tools",
                   "get_trace_stats,get_causal_chains,get_inflight,run_sql,get_check,get_stacks,"
                   "get_rdma_counters",
                   "--args",
                   R"({"get_causal_chains":{"limit":50},"run_sql":{"sql":")" + kNodeSql +
                       R"("},"get_stacks":{"op":"cudaLaunchKernel"}})"});
  ASSERT_FALSE(r.contains("fatal")) << r["fatal"];
  EXPECT_EQ(r["tools"].size(), 15u) << r["tools"];
  for (const char* t : {"get_trace_stats", "get_causal_chains", "get_inflight", "run_sql"}) {
    const Json& x = r["results"][t];
    ASSERT_FALSE(x.contains("exception")) << t << ": " << x["exception"];
    ASSERT_EQ(x["isError"], false) << t << ": " << x["text"];
  }
  // The tools that read a file itself say they are not served over a fleet.
  for (const char* t : {"get_check", "get_stacks", "get_rdma_counters"}) {
    const Json& x = r["results"][t];
    ASSERT_FALSE(x.contains("exception")) << t << ": " << x["exception"];
    EXPECT_EQ(x["isError"], true) << t << ": " << x["text"];
    EXPECT_EQ(x["text"].get<std::string>().rfind(
                  "this tool reads a trace file itself (its sessions, its stacks table) and is "
                  "not served over a fleet database",
                  0),
              0u)
        << t << ": " << x["text"];
  }

  // get_trace_stats: both nodes' calls.
  const Json& stats = r["results"]["get_trace_stats"]["structured"];
  EXPECT_EQ(stats["events"], 60);
  EXPECT_EQ(stats["nodes"], Json::array({"node-1", "node-2"}));
  std::map<std::string, int64_t> calls;
  for (const auto& op : stats["ops"]) calls[op["op"]] = op["calls"];
  EXPECT_EQ(calls, (std::map<std::string, int64_t>{{"cudaLaunchKernel", 30},
                                                   {"cudaStreamSynchronize", 30}}));

  // get_causal_chains: the chains `explain --source` finds, the fleet's first; among them the
  // collective hang across the two nodes, naming rank 3 and its node.
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", source, "--json"}, &out, &err), 0)
      << err;
  Json ex = Json::parse(out);
  std::vector<std::string> want;
  for (const auto& c : ex["fleet"]["chains"]) want.push_back(c["id"]);
  for (const auto& c : ex["chains"]) want.push_back(c["id"]);
  const Json& chains = r["results"]["get_causal_chains"]["structured"];
  std::vector<std::string> got;
  for (const auto& c : chains["chains"]) got.push_back(c["id"]);
  EXPECT_EQ(chains["total"], want.size());
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  ASSERT_FALSE(chains["chains"].empty()) << r["results"]["get_causal_chains"].dump(2);
  const Json& first = chains["chains"][0];
  EXPECT_EQ(first["rule"], "collective_hang");
  EXPECT_EQ(first["node"], "node-2");
  EXPECT_EQ(first["summary"],
            "Collective hang: ranks 0, 1 and 2 have waited 30 s inside ncclAllReduce #7 (the 8th "
            "collective on communicator 0xfeed, 4 ranks); rank 3 never entered it");

  // The same hang through Distributed tables over the shard (a cluster of one here): the
  // in-flight rows are read without a subquery ClickHouse would refuse there.
  ASSERT_EQ(
      run_command({INGERO_BIN, "ship", "--ddl", "--clickhouse", ch.url(0, "fleet"), "--cluster",
                   ClickHouseServers::kClusterName, "--shard-db", "ingero", "--create"},
                  &out, &err),
      0)
      << err;
  ASSERT_EQ(
      run_command({INGERO_BIN, "explain", "--source", ch.source(0, "fleet"), "--json"}, &out, &err),
      0)
      << err;
  Json dist = Json::parse(out)["fleet"]["chains"];
  ASSERT_FALSE(dist.empty());
  EXPECT_EQ(dist[0]["summary"], first["summary"]);

  // run_sql: ClickHouse ran it, read-only; the same rows as `ingero query --source`, and every
  // call of both nodes counted.
  const Json& sql = r["results"]["run_sql"]["structured"];
  EXPECT_EQ(sql["columns"], Json::array({"node", "calls"}));
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", source, "--json", kNodeSql}, &out, &err),
            0)
      << err;
  Json q = Json::parse(out);
  Json want_rows = Json::array();
  int64_t total = 0;
  for (const auto& row : q) {
    want_rows.push_back(Json::array({row["node"], row["calls"]}));
    total += row["calls"].get<int64_t>();
  }
  EXPECT_EQ(sql["rows"], want_rows);
  EXPECT_EQ(total, 60);
  EXPECT_EQ(sql["truncated"], false);

  // get_inflight: the four stuck threads, each with its node.
  const Json& in = r["results"]["get_inflight"]["structured"];
  EXPECT_EQ(in["nodes"], Json::array({"node-1", "node-2"}));
  EXPECT_EQ(in["omitted"], 0);
  std::set<std::pair<std::string, int>> stuck;
  for (const auto& t : in["stuck"])
    stuck.insert({t["node"].get<std::string>(), t["pid"].get<int>()});
  EXPECT_EQ(stuck, (std::set<std::pair<std::string, int>>{
                       {"node-1", 5001}, {"node-1", 5002}, {"node-2", 6001}, {"node-2", 6002}}));
}

}  // namespace
}  // namespace ingero::test
