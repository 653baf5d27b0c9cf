// The report's data model on real traces (the H100 fixtures and the original implementation's
// files), checked against SQL on the same file and against the engine: totals agree section
// by section, the flame graph totals the slow calls, every array is bounded.
#include "serve/report/report_model.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "engine/analysis.h"
#include "engine/chain.h"
#include "engine/result_json.h"
#include "engine/tenants.h"
#include "serve/report/call_pass.h"
#include "serve/report/flame_tree.h"
#include "serve/report/report_html.h"
#include "store/sql_trace_source.h"
#include "test_paths.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/trace_db.h"
#include "tests/unit/report_model_support.h"

namespace ingero::serve::report {
namespace {

using nlohmann::json;
using test_support::h100;
using test_support::model_of;
using test_support::sum;

std::string legacy(const std::string& name) {
  return std::string(INGERO_FIXTURES_DIR) + "/ingero-go/" + name + ".db";
}

// The sections that must agree with each other and with SQL, on any trace.
void expect_consistent(const std::string& path, const json& m) {
  uint64_t calls = uint64_t(test::query_int(path, "SELECT count(*) FROM calls"));
  EXPECT_EQ(m["header"]["calls"], calls);
  // Every call and host event, each once (a legacy file's `events` table holds a runtime
  // call's driver call beside it, which `calls` counts in it).
  EXPECT_EQ(m["header"]["events"],
            calls + uint64_t(test::query_int(path, "SELECT count(*) FROM host_events")));
  uint64_t op_calls = 0, slow = 0, hist = 0;
  for (const auto& op : m["ops"]) {
    op_calls += op["calls"].get<uint64_t>();
    slow += op["slow_calls"].get<uint64_t>();
    EXPECT_EQ(sum(op["hist"]["counts"]), op["calls"].get<uint64_t>()) << op["op"];
    EXPECT_EQ(op["hist"]["edges_ns"].size(), op["hist"]["counts"].size() + 1);
    hist += sum(op["hist"]["counts"]);
  }
  EXPECT_EQ(op_calls, calls);
  EXPECT_EQ(hist, calls);
  // The flame graph holds exactly the engine's tail: calls at or above their op's p95.
  EXPECT_EQ(m["flame"]["calls"]["total"], slow);
  EXPECT_EQ(m["flame"]["calls"]["tree"]["value"], slow);
  uint64_t roots = 0;
  for (const auto& c : m["flame"]["calls"]["tree"].value("children", json::array()))
    roots += c["value"].get<uint64_t>();
  EXPECT_EQ(roots, slow);
  uint64_t rated = sum(m["rates"]["other_calls"]);
  for (const auto& s : m["rates"]["series"]) rated += sum(s["calls"]);
  EXPECT_EQ(rated, calls);
  uint64_t per_node = 0;
  for (const auto& n : m["nodes"]) per_node += n["calls"].get<uint64_t>();
  EXPECT_EQ(per_node, calls);
}

// cli.md's caps of the report (the other tests narrow them): 1,500 step points per process,
// 50 kernel rows, 300 process rows, 100 chains.
TEST(ReportModel, TheShippedCapsAreTheDocumentedOnes) {
  ReportOptions o;
  EXPECT_EQ(o.max_step_points, 1500u);
  EXPECT_EQ(o.max_kernel_rows, 50u);
  EXPECT_EQ(o.max_processes, 300u);
  EXPECT_EQ(o.max_chains, 100u);
}

TEST(ReportModel, H100ContendedAgreesWithSqlAndTheEngine) {
  std::string path = h100("resnet-contended");
  json m = model_of(path);
  expect_consistent(path, m);
  EXPECT_EQ(m["format"], "ingero-report");
  EXPECT_EQ(m["trace"]["format"], "ingero schema 4");
  EXPECT_EQ(m["header"]["loss"]["ringbuf_drops"], 0);
  EXPECT_TRUE(m["header"]["loss_recorded"]);
  ASSERT_EQ(m["nodes"].size(), 1u);
  EXPECT_EQ(m["nodes"][0]["node"], "h100-a");
  // The training process's steps: the engine's series, every step drawn (150 + warm-up).
  auto reader = store::TraceReader::open(path);
  store::SqlTraceSource source(**reader);
  engine::Analysis a = engine::analyze(source, engine::Window{});
  ASSERT_EQ(m["steps"].size(), a.steps.processes.size());
  const json& s = m["steps"][0];
  const engine::StepSeries* es = a.steps.find(s["pid"].get<uint32_t>());
  ASSERT_NE(es, nullptr);
  EXPECT_EQ(s["steps"], es->steps.size());
  EXPECT_EQ(s["group"], 1);
  EXPECT_EQ(s["points"]["t"].size(), es->steps.size());
  // Stacked components sum to the step's duration (0.1 µs rounding per component).
  const json& p = s["points"];
  for (size_t i = 0; i < p["t"].size(); ++i) {
    double parts = 0;
    for (const char* k : {"wait_us", "enqueue_us", "api_us", "gap_on_cpu_us", "gap_preempted_us",
                          "gap_io_us", "gap_sleep_us", "gap_unknown_us", "host_other_us"})
      parts += p[k][i].get<double>();
    EXPECT_NEAR(parts, p["dur_us"][i].get<double>(), 1.0) << "step " << i;
  }
  EXPECT_EQ(m["chains"].size(), a.chains.size());
  EXPECT_EQ(m["chains"][0]["severity"], engine::severity_name(a.chains[0].severity));
  EXPECT_EQ(m["chains"][0]["summary"], a.chains[0].summary);
  // Python frames reach the flame graph.
  bool python = false;
  std::function<void(const json&)> walk = [&](const json& n) {
    if (n["k"] == "py") python = true;
    for (const auto& c : n.value("children", json::array())) walk(c);
  };
  walk(m["flame"]["calls"]["tree"]);
  EXPECT_TRUE(python);
  EXPECT_GT(m["flame"]["calls"]["stacks"].get<uint64_t>(), 10u);
  // Small: no raw rows.
  std::string html = render_report_html(m, path);
  EXPECT_LT(html.size(), 2u << 20) << "report of a 98,686-event trace";
}

// The report reads the engine's one JSON shape (engine/result_json.h, as explain --json and the
// MCP tools give it): each engine section of the model is that JSON, with only the report's
// own keys (node, chart points, call totals) added.
json without(json j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) j.erase(k);
  return j;
}

void expect_engine_shapes(const std::string& path, const json& m) {
  auto reader = store::TraceReader::open(path);
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  engine::Analysis a = engine::analyze(source, engine::Window{});
  size_t steps = 0;
  for (const auto& s : a.steps.processes) {
    if (s.steps.empty()) continue;
    const json& r = m["steps"][steps++];
    EXPECT_EQ(without(r, {"node", "steps", "group", "points"}),
              engine::step_series_json(s, a.process_name(s.pid)));
  }
  EXPECT_EQ(m["steps"].size(), steps);
  ASSERT_EQ(m["chains"].size(), a.chains.size());
  for (const auto& c : a.chains) {
    json want = engine::chain_json(c);
    bool found = false;
    for (const auto& r : m["chains"]) found = found || without(r, {"node"}) == want;
    EXPECT_TRUE(found) << want.dump();
  }
  ASSERT_EQ(m["kernels"]["processes"].size(), a.kernels.processes.size());
  for (const auto& r : m["kernels"]["processes"]) {
    const engine::ProcessKernels* k = nullptr;
    for (const auto& p : a.kernels.processes)
      if (p.pid == r["pid"]) k = &p;
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(without(r, {"node", "group", "points"}),
              engine::process_kernels_json(*k, a.process_name(k->pid), 50));
  }
  ASSERT_EQ(m["ops"].size(), a.stats.overall.size());
  for (const auto& s : a.stats.overall) {
    json want = engine::op_stats_json(s);
    size_t found = 0;
    for (const auto& r : m["ops"]) found += without(r, {"sum_ns", "slow_calls", "hist"}) == want;
    EXPECT_EQ(found, 1u) << want.dump();
  }
  for (const auto& p : a.processes) {
    json want = without(engine::process_json(p), {"calls", "name"});
    size_t found = 0;
    for (const auto& r : m["processes"])
      if (r["pid"] == p.pid)
        found += without(r, {"node", "calls", "name", "threads", "errors", "busy_ns", "unfinished",
                             "first_ns", "last_ns", "cmdline"}) == want;
    EXPECT_EQ(found, 1u) << want.dump();
  }
  json tenants = engine::tenants_json(engine::tenant_report(a));
  ASSERT_EQ(m["tenants"]["rows"].size(), tenants["tenants"].size());
  for (size_t i = 0; i < tenants["tenants"].size(); ++i)
    EXPECT_EQ(without(m["tenants"]["rows"][i], {"node"}), tenants["tenants"][i]);
  ASSERT_EQ(m["tenants"]["preemptions"].size(), tenants["preemptions"].size());
  for (size_t i = 0; i < tenants["preemptions"].size(); ++i)
    EXPECT_EQ(without(m["tenants"]["preemptions"][i], {"node"}), tenants["preemptions"][i]);
}

TEST(ReportModel, EngineSectionsAreTheEngineJson) {
  for (const char* name : {"resnet-contended", "nccl-1rank"}) {
    SCOPED_TRACE(name);
    std::string path = h100(name);
    expect_engine_shapes(path, model_of(path));
  }
  std::string path = legacy("pytorch-dataloader-starvation");
  expect_engine_shapes(path, model_of(path));
}

TEST(ReportModel, LegacyFileHasNoLossCountersAndSaysSo) {
  std::string path = legacy("pytorch-dataloader-starvation");
  json m = model_of(path);
  expect_consistent(path, m);
  EXPECT_TRUE(m["trace"]["legacy"]);
  // Its 16 + 3 + 7 driver calls made inside runtime calls are counted in them, and said so.
  EXPECT_EQ(m["trace"]["nested_calls_folded"], 26);
  EXPECT_EQ(m["trace"]["format"],
            "ingero-go schema 0.8 (read-only); 26 driver calls made inside runtime calls are "
            "counted in them");
  EXPECT_FALSE(m["header"]["loss_recorded"]);
  bool notice = false;
  for (const auto& w : m["header"]["warnings"])
    if (w["level"] == "notice" &&
        w["text"].get<std::string>().find("no loss counters") != std::string::npos)
      notice = true;
  EXPECT_TRUE(notice);
  EXPECT_EQ(m["header"]["sessions"].size(), 1u);
  EXPECT_EQ(m["header"]["sessions"][0]["gpu_model"], "NVIDIA GeForce RTX 4090, 24564 MiB");
}

TEST(ReportModel, MergedClusterIsAnalysedNodeByNode) {
  std::string path = legacy("sample-cluster");
  json m = model_of(path);
  expect_consistent(path, m);
  ASSERT_EQ(m["nodes"].size(), 3u);
  for (const auto& n : m["nodes"])
    EXPECT_EQ(n["calls"], test::query_int(path, "SELECT count(*) FROM calls WHERE node = '" +
                                                    n["node"].get<std::string>() + "'"));
  for (const auto& p : m["processes"]) EXPECT_NE(p["node"], "");
}

TEST(ReportModel, NcclCollectivesPerRank) {
  // Ground truth (tests/fixtures/h100/README.md): one rank, 40 all_reduce of 1,048,576
  // floats, 10 broadcast (ncclBroadcast, and ncclBcast calling it), 5 all_gather.
  std::string path = h100("nccl-1rank");
  json m = model_of(path);
  expect_consistent(path, m);
  std::map<std::string, json> by_op;
  for (const auto& g : m["collectives"]) by_op[g["op"]] = g;
  ASSERT_EQ(by_op.size(), 4u);
  const json& ar = by_op["ncclAllReduce"];
  EXPECT_EQ(ar["ranks"], 1);
  ASSERT_EQ(ar["rows"].size(), 1u);
  EXPECT_EQ(ar["rows"][0]["rank"], 0);
  EXPECT_EQ(ar["rows"][0]["calls"], 40);
  EXPECT_EQ(ar["rows"][0]["bytes"], 40ull * 1048576 * 4);
  EXPECT_EQ(by_op["ncclBroadcast"]["rows"][0]["calls"], 10);
  EXPECT_EQ(by_op["ncclAllGather"]["rows"][0]["calls"], 5);
}

TEST(ReportModel, ArraysAreBounded) {
  std::string path = h100("resnet-contended");
  ReportOptions o;
  o.max_step_points = 40;
  o.max_rate_buckets = 5;
  o.max_rate_ops = 2;
  o.max_processes = 1;
  o.max_chains = 1;
  o.max_flame_nodes = 50;
  json m = model_of(path, o);
  const json& s = m["steps"][0];
  EXPECT_LE(s["points"]["t"].size(), 40u);
  EXPECT_GT(s["group"].get<size_t>(), 1u);
  EXPECT_LE(m["rates"]["t"].size(), 5u);
  EXPECT_EQ(m["rates"]["series"].size(), 2u);
  EXPECT_EQ(m["processes"].size(), 1u);
  EXPECT_GT(m["processes_total"].get<uint64_t>(), 1u);
  EXPECT_EQ(m["chains"].size(), 1u);
  EXPECT_GT(m["chains_total"].get<uint64_t>(), 1u);
  EXPECT_TRUE(m["flame"]["calls"]["truncated"]);
  // Folded, not lost: the totals stay exact.
  expect_consistent(path, m);
}

TEST(ReportModel, WindowRestrictsEverySection) {
  std::string path = h100("resnet-contended");
  int64_t first = test::query_int(path, "SELECT min(ts_ns) FROM calls");
  int64_t last = test::query_int(path, "SELECT max(ts_ns) FROM calls");
  int64_t from = first + (last - first) / 4, to = from + (last - first) / 2;
  ReportOptions o;
  o.window.from_ns = from;
  o.window.to_ns = to;
  json m = model_of(path, o);
  std::string where = " WHERE ts_ns BETWEEN " + std::to_string(from) + " AND " + std::to_string(to);
  uint64_t calls = uint64_t(test::query_int(path, "SELECT count(*) FROM calls" + where));
  EXPECT_GT(calls, 1000u);
  EXPECT_EQ(m["header"]["calls"], calls);
  uint64_t op_calls = 0;
  for (const auto& op : m["ops"]) op_calls += sum(op["hist"]["counts"]);
  EXPECT_EQ(op_calls, calls);
  EXPECT_GE(m["window"]["start_ns"].get<int64_t>(), from);
  EXPECT_LE(m["window"]["end_ns"].get<int64_t>(), to + 1'000'000'000LL);  // + the last duration
}

// A window without a call (here one of 2020, before the trace) has no rate bucket: it had one
// at time 0, which the JSON gave as -1.8e9 s from the window's start.
TEST(ReportModel, AWindowWithoutCallsHasNoRateBuckets) {
  std::string path = h100("starve");
  ReportOptions o;
  o.window.from_ns = 1'577'836'800'000'000'000;  // 2020-01-01
  o.window.to_ns = 1'577'923'200'000'000'000;
  json m = model_of(path, o);
  EXPECT_EQ(m["header"]["calls"], 0u);
  EXPECT_EQ(m["rates"]["t"], json::array());
  EXPECT_EQ(m["rates"]["series"], json::array());
}

TEST(ReportBins, QuarterOctaveBinsCoverEveryValue) {
  for (uint64_t v : {0ull, 1ull, 7ull, 8ull, 9ull, 10ull, 15ull, 16ull, 1000ull, 123456789ull,
                     (1ull << 40) + 12345, (1ull << 62) + 1}) {
    size_t b = latency_bin(v);
    EXPECT_LE(bin_lower_edge(b), v) << v;
    EXPECT_GT(bin_lower_edge(b + 1), v) << v;
  }
  EXPECT_LT(latency_bin(UINT64_MAX), kLatencyBins);
  uint32_t bins[kLatencyBins] = {};
  bins[latency_bin(1000)] = 99;
  bins[latency_bin(1'000'000)] = 1;
  double p50 = hist_quantile(bins, kLatencyBins, 0.5),
         p99 = hist_quantile(bins, kLatencyBins, 0.99);
  double p100 = hist_quantile(bins, kLatencyBins, 1.0);
  EXPECT_NEAR(p50, 1000, 125);
  EXPECT_NEAR(p99, 1000, 125);  // rank 99 of 100
  EXPECT_NEAR(p100, 1'000'000, 125'000);
  EXPECT_EQ(bucket_width_ns(40'000'000'000LL, 600), 1'000'000'000LL);
  EXPECT_EQ(bucket_width_ns(3'600'000'000'000LL, 600), 10'000'000'000LL);
}

TEST(ReportFlame, TreeGrowsFromTheOutermostFrameAndKeepsTotalsUnderTheCap) {
  using F = engine::StackFrameInfo;
  std::vector<F> a = {
      {false, "cudaMalloc", "", 0, "/usr/lib/libcudart.so.13", "libcudart.so.13+0x10"},
      {true, "step", "/src/train.py", 57, "", ""},
      {true, "<module>", "/src/train.py", 80, "", ""},
      {false, "", "", 0, "", "+0x0"}};
  std::vector<F> b = a;
  b[1].line = 58;
  FlameTree t("slow calls", 100);
  t.add(a, "cudaMalloc", "op", 3, 3000);
  t.add(b, "cudaMalloc", "op", 2, 5000);
  t.add({}, "cudaFree", "op", 4, 400);
  json j = t.to_json();
  EXPECT_EQ(j["value"], 9);
  EXPECT_EQ(t.without_stack(), 4u);
  ASSERT_EQ(j["children"].size(), 2u);  // <module> (5 calls), [no stack] (4): widest first
  const json& mod = j["children"][0];
  EXPECT_EQ(mod["name"], "<module> (train.py:80)");
  EXPECT_EQ(mod["k"], "py");
  EXPECT_EQ(mod["value"], 5);
  EXPECT_EQ(mod["t"], 8000);
  EXPECT_EQ(t.locations()[mod["li"].get<size_t>()], "/src/train.py:80");
  ASSERT_EQ(mod["children"].size(), 2u);  // step at line 57 and at line 58
  const json& leaf = mod["children"][0]["children"][0]["children"][0];
  EXPECT_EQ(leaf["name"], "cudaMalloc");
  EXPECT_EQ(leaf["k"], "op");
  EXPECT_EQ(j["children"][1]["name"], "[no stack]");
  // Under a cap of 3 nodes, later stacks fold; the root's children still total every call.
  FlameTree small("slow calls", 3);
  small.add(a, "cudaMalloc", "op", 3, 3000);
  std::vector<F> c = a;
  c[2].function = "main";
  small.add(c, "cudaMalloc", "op", 7, 7000);
  json s = small.to_json();
  EXPECT_TRUE(small.truncated());
  uint64_t roots = 0;
  for (const auto& r : s["children"]) roots += r["value"].get<uint64_t>();
  EXPECT_EQ(roots, 10u);
  EXPECT_EQ(s["value"], 10);
}

// Two template instances alike in their first 157 characters are two frames, each shown
// clipped: they were one, their calls summed (a hostile tester's edit of starve.db).
TEST(ReportFlame, FramesAlikeInTheirClippedNamesStayApart) {
  using F = engine::StackFrameInfo;
  const std::string head = "void at::native::elementwise_kernel_helper<" + std::string(200, 'x');
  std::vector<F> div = {{false, head + "DivFunctor<float>", "", 0, "libtorch.so", ""}};
  std::vector<F> mul = {{false, head + "MulFunctor<float>", "", 0, "libtorch.so", ""}};
  FlameTree t("slow calls", 100);
  t.add(div, "", "op", 22, 2200);
  t.add(mul, "", "op", 7, 700);
  json j = t.to_json();
  ASSERT_EQ(j["children"].size(), 2u);
  EXPECT_EQ(j["children"][0]["value"], 22);
  EXPECT_EQ(j["children"][1]["value"], 7);
  const std::string shown = j["children"][0]["name"];
  EXPECT_EQ(shown.size(), 160u);
  EXPECT_EQ(shown, frame_label(div[0]));
}

// Found by a hostile-testing helper (helper-71): two packages' mod.py, each with a `run`
// calling at line 3, were one node "run (mod.py:3)" of 11 calls, its location the second
// file's, where 5 of the calls came from the first.
TEST(ReportFlame, PythonFramesOfTwoFilesOfOneNameStayApart) {
  using F = engine::StackFrameInfo;
  std::vector<F> a = {{true, "run", "/w/sa/pk/mod.py", 3, "", ""}};
  std::vector<F> b = {{true, "run", "/w/sb/pk/mod.py", 3, "", ""}};
  FlameTree t("calls", 100);
  t.add(a, "cudaMalloc", "op", 5, 500);
  t.add(b, "cudaMalloc", "op", 6, 600);
  t.add(a, "cudaMalloc", "op", 1, 100);
  json j = t.to_json();
  ASSERT_EQ(j["children"].size(), 2u) << j.dump();
  std::map<std::string, uint64_t> by_location;
  for (const auto& c : j["children"]) {
    EXPECT_EQ(c["name"], "run (mod.py:3)");
    by_location[t.locations()[c["li"].get<size_t>()]] = c["value"].get<uint64_t>();
  }
  EXPECT_EQ(by_location,
            (std::map<std::string, uint64_t>{{"/w/sa/pk/mod.py:3", 6}, {"/w/sb/pk/mod.py:3", 6}}));
}

TEST(ReportHtml, TheCspAllowsExactlyTheInlineScript) {
  std::string html = render_report_html(json{{"x", 1}}, "t");
  size_t data = html.find("id=\"ingero-data\"");
  ASSERT_NE(data, std::string::npos);
  size_t open = html.find("<script>", data);
  size_t close = html.find("</script>", open);
  ASSERT_NE(close, std::string::npos);
  std::string script = html.substr(open + 8, close - open - 8);
  unsigned char md[32];
  SHA256(reinterpret_cast<const unsigned char*>(script.data()), script.size(), md);
  unsigned char b64[64];
  int n = EVP_EncodeBlock(b64, md, 32);
  std::string hash = "'sha256-" + std::string(reinterpret_cast<char*>(b64), size_t(n)) + "'";
  size_t csp = html.find("Content-Security-Policy");
  ASSERT_NE(csp, std::string::npos);
  std::string meta = html.substr(csp, html.find('>', csp) - csp);
  for (size_t q; (q = meta.find("&#39;")) != std::string::npos;) meta.replace(q, 5, "'");
  EXPECT_NE(meta.find("script-src " + hash), std::string::npos) << meta;
  EXPECT_NE(meta.find("connect-src 'none'"), std::string::npos) << meta;
  EXPECT_NE(meta.find("default-src 'none'"), std::string::npos) << meta;
  // One executable script only.
  EXPECT_EQ(html.find("<script>", close), std::string::npos);
}

TEST(ReportHtml, TraceStringsCannotEscapeTheDataElement) {
  json m = {{"name", "</script><script>alert(1)</script><!--"}};
  std::string s = json_for_html(m);
  EXPECT_EQ(s.find('<'), std::string::npos);
  EXPECT_EQ(json::parse(s), m);
}

}  // namespace
}  // namespace ingero::serve::report
