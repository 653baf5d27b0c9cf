// The original implementation's trace files, opened as they are: the published statistics
// and diagnoses must come out of them, and the files must not change.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "app/explain_report.h"
#include "store/sql_trace_source.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

const std::string kDir = INGERO_FIXTURES_DIR "/ingero-go/";

struct Analyzed {
  std::unique_ptr<store::TraceReader> reader;
  engine::Analysis a;
};

Analyzed analyze_file(const std::string& path) {
  auto r = store::TraceReader::open(path);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  Analyzed out{std::move(*r), {}};
  store::SqlTraceSource src(*out.reader);
  out.a = engine::analyze(src, engine::Window{});
  EXPECT_EQ(src.error(), "");
  return out;
}

const engine::OpStats& overall(const engine::Analysis& a, const std::string& op) {
  for (const auto& s : a.stats.overall)
    if (s.key.op == op) return s;
  throw std::runtime_error("no op " + op);
}

TEST(LegacyFiles, DataloaderStatsReproduceTheArticle) {
  std::string path = kDir + "pytorch-dataloader-starvation.db";
  std::string before = test::sha256_file(path);
  {
    auto f = analyze_file(path);
    const auto& a = f.a;
    // The file's 3,807 events, each call once: 26 driver calls are counted in theirs.
    EXPECT_EQ(a.events, 3807u - 26);
    EXPECT_EQ(std::lround(double(a.span.second - a.span.first) / 1e9), 77);
    auto ss = a.host.ops.at("sched_switch");
    EXPECT_EQ(ss.count, 3676u);
    EXPECT_EQ(std::lround(double(ss.sum_ns) / double(ss.count) / 1000), 401);  // ~401 us
    EXPECT_EQ(std::lround(double(ss.max_ns) / 1e5), 239);                      // 23.9 ms
    EXPECT_EQ(a.host.ops.at("process_fork").count, 11u);
    EXPECT_EQ(a.host.ops.at("process_exit").count, 5u);
    // The article's table counts both calls of a runtime call that entered the driver (the
    // original implementation stored both): its figures are the file's own events.
    struct Want {
      const char* op;
      int64_t calls;
      double avg_us;
    } published[] = {{"cudaMemcpyAsync", 14, 31511.1}, {"cudaLaunchKernel", 16, 1686.7},
                     {"cudaStreamSync", 21, 31.1},     {"cudaDeviceSync", 3, 17234.3},
                     {"cuLaunchKernel", 41, 39.6},     {"cuMemAlloc", 10, 306.6},
                     {"cudaMalloc", 7, 461.7},         {"cuCtxSynchronize", 3, 17178.9}};
    for (const auto& w : published) {
      auto row = test::query_rows(
          path, std::string("SELECT count(*), avg(e.duration) / 1000 FROM events e JOIN ops o ON "
                            "o.source_id = e.source AND o.op_id = e.op WHERE o.name = '") +
                    w.op + "'");
      EXPECT_EQ(std::stoll(row.at(0).at(0)), w.calls) << w.op;
      EXPECT_NEAR(std::stod(row.at(0).at(1)), w.avg_us, 0.1) << w.op;
    }
    // explain counts each call once, as ingero records it: the 16 + 3 + 7 driver calls made
    // inside a runtime call are counted in it (store/legacy_views.h).
    EXPECT_EQ(f.reader->legacy_nested_calls(), 26);
    Want want[] = {{"cudaMemcpyAsync", 14, 31511.1}, {"cudaLaunchKernel", 16, 1686.7},
                   {"cudaStreamSync", 21, 31.1},     {"cudaDeviceSync", 3, 17234.3},
                   {"cuLaunchKernel", 25, 47.4},     {"cuMemAlloc", 3, 106.9},
                   {"cudaMalloc", 7, 461.7}};
    for (const auto& w : want) {
      const auto& s = overall(a, w.op);
      EXPECT_EQ(int64_t(s.count), w.calls) << w.op;
      EXPECT_NEAR(s.avg_ns() / 1000, w.avg_us, 0.1) << w.op;
    }
    EXPECT_THROW(overall(a, "cuCtxSynchronize"), std::runtime_error);  // each inside a sync
    EXPECT_EQ(overall(a, "cudaLaunchKernel").max_ns, 25799899u);       // 25.8 ms
    EXPECT_EQ(overall(a, "cudaMemcpyAsync").max_ns, 65000369u);        // 65 ms
    // Diagnosis: host CPU contention, naming the main process and its workers.
    bool found = false;
    for (const auto& c : a.chains) {
      if (c.rule != "host_cpu_contention") continue;
      found = true;
      EXPECT_EQ(c.pids, std::vector<uint32_t>{2233});
      EXPECT_NE(c.root_cause.find("CPU scheduling contention"), std::string::npos) << c.root_cause;
      EXPECT_NE(c.summary.find("3,676"), std::string::npos) << c.summary;
      EXPECT_NE(c.summary.find("pt_data_worker"), std::string::npos) << c.summary;
    }
    EXPECT_TRUE(found);
    // Every tail chain on this file points at the host CPU too.
    for (const auto& c : a.chains) EXPECT_NE(c.rule, "tail_latency") << c.summary;
  }
  EXPECT_EQ(test::sha256_file(path), before);
}

TEST(LegacyFiles, VllmEnginePreemptionStallsLaunches) {
  std::string path = kDir + "vllm-37343-logprobs-amplification.db";
  std::string before = test::sha256_file(path);
  {
    auto f = analyze_file(path);
    const auto& a = f.a;
    EXPECT_EQ(a.events, 10869u - 445);  // the article's 10,869, each call once
    EXPECT_EQ(a.host.ops.at("sched_switch").count, 7757u);
    EXPECT_EQ(overall(a, "cudaLaunchKernel").count, 550u);
    // 435 of the file's 1,672 cuLaunchKernel are inside a cudaLaunchKernel: counted in it.
    EXPECT_EQ(overall(a, "cuLaunchKernel").count, 1237u);
    EXPECT_EQ(overall(a, "cudaMemcpyAsync").count, 734u);
    EXPECT_EQ(overall(a, "cudaDeviceSync").count, 10u);
    // Exact nearest-rank percentiles, checked against SQL.
    for (const char* op : {"cudaLaunchKernel", "cudaDeviceSync"}) {
      int64_t n =
          test::query_int(path, std::string("SELECT count(*) FROM calls WHERE op = '") + op + "'");
      for (auto [q, v] :
           {std::pair{0.5, overall(a, op).p50}, std::pair{0.99, overall(a, op).p99}}) {
        int64_t rank = int64_t(std::ceil(q * double(n)));
        EXPECT_EQ(int64_t(v),
                  test::query_int(path, std::string("SELECT dur_ns FROM calls WHERE op = '") + op +
                                            "' ORDER BY dur_ns LIMIT 1 OFFSET " +
                                            std::to_string(rank - 1)))
            << op << " q=" << q;
      }
    }
    EXPECT_EQ(overall(a, "cudaLaunchKernel").p50 / 1000, 20u);    // 20 us
    EXPECT_EQ(overall(a, "cudaLaunchKernel").p99 / 1000, 5079u);  // 5,079 us
    // The engine thread lost the CPU while it should have been launching.
    bool launch_cpu = false;
    for (const auto& c : a.chains) {
      bool launch = c.op == "launch" || c.op == "cudaLaunchKernel" || c.op == "cuLaunchKernel";
      bool cpu = c.root_cause.find("CPU") != std::string::npos;
      if (launch && cpu && c.pids == std::vector<uint32_t>{72801} &&
          (c.severity == engine::Severity::kHigh || c.severity == engine::Severity::kMedium))
        launch_cpu = true;
    }
    EXPECT_TRUE(launch_cpu);
    EXPECT_EQ(f.a.process_name(72801), "VLLM::EngineCor");
  }
  EXPECT_EQ(test::sha256_file(path), before);
}

TEST(LegacyFiles, PublishedQueriesRunVerbatim) {
  std::string path = kDir + "pytorch-dataloader-starvation.db";
  auto rows = test::query_rows(path,
                               "SELECT pn.name, COUNT(*) as events\n"
                               "FROM events e\n"
                               "JOIN process_names pn ON e.pid = pn.pid\n"
                               "GROUP BY pn.name\n"
                               "ORDER BY events DESC");
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0][0], "python3");
  auto cluster =
      test::query_rows(kDir + "sample-cluster.db",
                       "SELECT node, source, count(*) as cnt, avg(duration)/1000 as avg_us\n"
                       "     FROM events GROUP BY node, source");
  ASSERT_EQ(cluster.size(), 8u);
  EXPECT_EQ(cluster[0][0], "gpu-node-01");
  EXPECT_EQ(cluster[0][2], "99");
  // Calls longer than 1 ms: 15 events of sources 1 and 4 in the raw table, of which the 3
  // cuCtxSynchronize are inside the 3 cudaDeviceSync, which cuda_events counts once each.
  EXPECT_EQ(test::query_int(path,
                            "SELECT COUNT(*) FROM events WHERE source IN (1, 4) AND duration > "
                            "1000000"),
            15);
  EXPECT_EQ(test::query_int(path, "SELECT COUNT(*) FROM cuda_events WHERE duration_ns > 1000000"),
            12);
  EXPECT_EQ(
      test::query_int(path, "SELECT COUNT(*) FROM tcp_events WHERE event = 'tcp_retransmit_skb'"),
      0);
  EXPECT_EQ(test::query_int(path, "SELECT COUNT(*) FROM host_events WHERE event = 'sched_switch'"),
            3676);
}

TEST(LegacyFiles, NodeFilesAndTheMergedFileAgree) {
  std::string merged = test::temp_path("merged.db");
  std::vector<std::string> argv = {INGERO_BIN, "merge"};
  for (int i = 1; i <= 3; ++i)
    argv.push_back(kDir + "sample-gpu-node-0" + std::to_string(i) + ".db");
  argv.push_back("-o");
  argv.push_back(merged);
  std::string err;
  ASSERT_EQ(test::run_command(argv, nullptr, &err), 0) << err;
  const char* q =
      "SELECT node, source, count(*), round(avg(duration)) FROM events GROUP BY 1, 2 ORDER BY 1, 2";
  EXPECT_EQ(test::query_rows(merged, q), test::query_rows(kDir + "sample-cluster.db", q));
  EXPECT_EQ(test::query_int(merged, "SELECT count(DISTINCT node) FROM sessions"), 3);
  // A stack seen on two nodes is kept once: 8 + 1 + 1 stacks in the node files, 9 merged.
  EXPECT_EQ(test::query_int(merged, "SELECT count(*) FROM stack_traces"), 9);
  EXPECT_EQ(test::query_int(kDir + "sample-cluster.db", "SELECT count(*) FROM stack_traces"), 9);
  // The same file twice would count every call twice: refused.
  std::string twice = test::temp_path("twice.db");
  EXPECT_EQ(test::run_command({INGERO_BIN, "merge", kDir + "sample-cluster.db",
                               kDir + "sample-cluster.db", "-o", twice},
                              nullptr, &err),
            1)
      << err;
  EXPECT_NE(err.find("merging both would count its calls twice"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(twice));
  // A node file beside the merged file that holds it (the original implementation's merge):
  // the same session, by node and start.
  EXPECT_EQ(test::run_command({INGERO_BIN, "merge", kDir + "sample-gpu-node-02.db",
                               kDir + "sample-cluster.db", "-o", twice},
                              nullptr, &err),
            1)
      << err;
  EXPECT_NE(err.find(kDir +
                     "sample-cluster.db: the session of node gpu-node-02 started at "
                     "2026-04-03 12:27:02 UTC (1775219222620981782) is also in " +
                     kDir + "sample-gpu-node-02.db"),
            std::string::npos)
      << err;
  // 0.8 files carry no node: the file name stands in.
  std::string old = test::temp_path("old.db");
  ASSERT_EQ(
      test::run_command({INGERO_BIN, "merge", kDir + "pytorch-dataloader-starvation.db", "-o", old},
                        nullptr, &err),
      0);
  EXPECT_EQ(test::query_rows(old, "SELECT DISTINCT node FROM events")[0][0],
            "pytorch-dataloader-starvation");
  // Every event but the 26 driver calls made inside runtime calls, which are counted in them
  // as ingero records them, and said so.
  EXPECT_EQ(test::query_int(old, "SELECT count(*) FROM events"), 3807 - 26);
  EXPECT_EQ(test::query_int(old, "SELECT sum(nested_calls) FROM calls"), 26);
  EXPECT_NE(err.find("pytorch-dataloader-starvation.db: 26 driver calls made inside runtime "
                     "calls are counted in them (nested_calls), as ingero records them"),
            std::string::npos)
      << err;
}

// explain --json has one shape for one node or several: the merged three-node file has the
// same top-level keys as a one-node file, its rows tagged with their node, and `nodes` lists
// each node; the events add up.
TEST(LegacyFiles, ExplainJsonHasOneShapeForOneNodeOrSeveral) {
  auto explain = [](const std::string& file) {
    std::string out;
    EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", kDir + file, "--json"}, &out), 0);
    return nlohmann::json::parse(out);
  };
  auto one = explain("sample-gpu-node-02.db");
  auto many = explain("sample-cluster.db");
  std::set<std::string> keys_one, keys_many;
  for (const auto& [k, v] : one.items()) keys_one.insert(k);
  for (const auto& [k, v] : many.items()) keys_many.insert(k);
  keys_many.erase("fleet");  // several nodes add the cross-node analysis
  EXPECT_EQ(keys_one, keys_many);
  EXPECT_TRUE(many.contains("fleet"));
  ASSERT_EQ(one["nodes"].size(), 1u);
  EXPECT_EQ(one["nodes"][0]["events"], one["events"]);
  ASSERT_EQ(many["nodes"].size(), 3u);
  uint64_t events = 0;
  std::set<std::string> nodes;
  for (const auto& n : many["nodes"]) {
    events += n["events"].get<uint64_t>();
    nodes.insert(n["node"].get<std::string>());
  }
  EXPECT_EQ(many["events"], events);
  EXPECT_EQ(nodes.size(), 3u);
  for (const char* list : {"stats", "chains"})
    for (const auto& row : many[list]) EXPECT_EQ(nodes.count(row["node"]), 1u) << row.dump();
  EXPECT_EQ(many["stats"].size() > 0, true);
}

TEST(LegacyFiles, PerfettoExportHasATrackPerNodeAndPid) {
  std::string out = test::temp_path("trace.json");
  std::string err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "export", "--format", "perfetto", "--db",
                               kDir + "sample-cluster.db", "-o", out},
                              nullptr, &err),
            0)
      << err;
  std::ifstream f(out);
  auto j = nlohmann::json::parse(f);
  ASSERT_TRUE(j.is_array());
  size_t meta = 0, complete = 0, begins = 0, ends = 0;
  std::set<std::string> names;
  for (const auto& e : j) {
    if (e["ph"] == "M") {
      ++meta;
      names.insert(e["args"]["name"].get<std::string>());
    }
    if (e["ph"] == "X") ++complete;
    begins += e["ph"] == "b";  // host intervals: async slices (app/export_perfetto.h)
    ends += e["ph"] == "e";
  }
  EXPECT_EQ(complete + begins, 600u);  // every event of the file
  EXPECT_EQ(begins, ends);
  EXPECT_EQ(complete,
            size_t(test::query_int(kDir + "sample-cluster.db", "SELECT count(*) FROM calls")));
  EXPECT_EQ(meta, size_t(test::query_int(
                      kDir + "sample-cluster.db",
                      "SELECT count(*) FROM (SELECT DISTINCT node, pid FROM events)")));
  EXPECT_EQ(names.size(), meta);  // a track a (node, pid), each named once
  EXPECT_EQ(names.count("gpu-node-02 / python3 (pid 4599)"), 1u);
}

TEST(LegacyFiles, ForeignFileIsAClearError) {
  std::string err;
  int rc = test::run_command({INGERO_BIN, "explain", "--db", kDir + "sample-cluster-trace.json"},
                             nullptr, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("not a"), std::string::npos) << err;
}

// Found by a hostile-testing helper: one event of an ingero-go file at timestamp INT64_MAX
// crashed `export` (SIGSEGV): that call's start met the empty run expander's sentinel, and it
// was asked for a call it did not have. Every call is read, the edited one last.
TEST(LegacyFiles, ACallAtTheLastInstantIsReadLast) {
  std::string path = test::temp_path("max-ts.db");
  std::filesystem::copy_file(kDir + "pytorch-dataloader-starvation.db", path,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(path, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  {
    auto db = store::Db::open(path, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(db) << db.error().message;
    ASSERT_TRUE((*db)->exec("UPDATE events SET timestamp = 9223372036854775807 WHERE id = 60"));
  }
  auto r = store::TraceReader::open(path);
  ASSERT_TRUE(r) << r.error().message;
  store::SqlTraceSource src(**r);
  size_t calls = 0;
  uint64_t last = 0;
  src.calls(engine::Window{}, [&](const hal::Event& e) {
    ++calls;
    last = e.ts_ns;
  });
  EXPECT_EQ(src.error(), "");
  EXPECT_EQ(last, uint64_t(INT64_MAX));
  EXPECT_GT(calls, 0u);
}

// Found by a hostile-testing helper: an ingero-go file (WAL mode) on read-only media could
// not be read at all ("not a readable SQLite database: unable to open database file"): SQLite
// needs a -shm beside a WAL-mode file and could not make one. On a read-only file system
// nothing can change the file, and it is opened as immutable: read, nothing made beside it.
TEST(LegacyFiles, AFileOnReadOnlyMediaIsRead) {
  std::string mnt = test::temp_path("ro");
  std::filesystem::create_directories(mnt);
  std::string out, err;
  int rc = test::run_command(
      {"unshare", "-rm", "/bin/sh", "-c",
       "mount -t tmpfs -o size=8m tmpfs " + mnt + " || exit 99; cp " + kDir +
           "sample-gpu-node-01.db " + mnt + "/ && mount -o remount,ro " + mnt + " || exit 99; " +
           INGERO_BIN + " explain --db " + mnt +
           "/sample-gpu-node-01.db > /dev/null; rc=$?; ls -A " + mnt + "; exit $rc"},
      &out, &err);
  if (rc == 99) {
    if (test::running_in_ci()) FAIL() << "CI=true but no private read-only tmpfs: " << err;
    GTEST_SKIP() << "*** SKIPPED: cannot mount a tmpfs in a user namespace: " << err << " ***";
  }
  EXPECT_EQ(rc, 0) << err;
  EXPECT_EQ(out, "sample-gpu-node-01.db\n") << "made beside it: " << out;
}

// A copy of the dataloader file with `sql` run on it: the damage a hostile-testing helper
// planted (the fixture stays as it is).
std::string damaged_copy(const std::string& name, const std::string& sql) {
  std::string path = test::temp_path(name);
  std::filesystem::copy_file(kDir + "pytorch-dataloader-starvation.db", path,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(path, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  auto db = store::Db::open(path, store::Db::Mode::kReadWrite);
  EXPECT_TRUE(db) << db.error().message;
  EXPECT_TRUE((*db)->exec(sql));
  return path;
}

std::string explain_text(const std::string& path) {
  std::string out, err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "explain", "--db", path}, &out, &err), 0) << err;
  return out;
}

// A version of the original implementation's schema this build was not written for is read as
// the one its columns look like, and explain, the report and MCP's check say so (it was read
// without a word).
TEST(LegacyFiles, AnUnknownSchemaVersionIsSaid) {
  std::string path = damaged_copy("unknown-version.db",
                                  "UPDATE schema_info SET value = '1.4' WHERE key = 'version'");
  const std::string said =
      "ingero-go schema 1.4 (read-only; not a version this build knows, 0.8 or 0.9: read as 0.8, "
      "and what it changed is not read)";
  std::string out = explain_text(path);
  EXPECT_NE(out.find(said), std::string::npos) << out;
  std::string json, err;
  ASSERT_EQ(
      test::run_command({INGERO_BIN, "report", "--db", path, "--json", "-o", "-"}, &json, &err), 0)
      << err;
  EXPECT_EQ(nlohmann::json::parse(json)["trace"]["format"].get<std::string>().rfind(said, 0), 0u);
  // A version it knows says nothing more.
  EXPECT_NE(explain_text(kDir + "pytorch-dataloader-starvation.db")
                .find("ingero-go schema 0.8 (read-only)"),
            std::string::npos);
}

// Found by a hostile-testing helper: two cudaStreamSync of -5000 ns (a negative duration read
// as unsigned) made the op's p95, p99 and max 18446744073.7 s in explain, the report and MCP. A
// negative duration is none: the calls are counted, untimed, and no latency; the quantiles are
// the nearest ranks of the 19 timed calls, and explain says how many were so read.
TEST(LegacyFiles, ANegativeDurationIsNoLatency) {
  std::string path =
      damaged_copy("negative-duration.db", "UPDATE events SET duration = -5000 WHERE id IN (4, 6)");
  {
    auto f = analyze_file(path);
    const auto& s = overall(f.a, "cudaStreamSync");
    EXPECT_EQ(s.count, 21u);
    EXPECT_EQ(s.errors, 0u);
    EXPECT_EQ(s.sum_ns, 597003u);  // the 19 timed calls'
    EXPECT_EQ(s.max_ns, 93587u);
    EXPECT_EQ(s.p50, 27657u);
    EXPECT_EQ(s.p95, 93587u);
    EXPECT_EQ(s.p99, 93587u);
  }
  EXPECT_EQ(test::query_rows(path,
                             "SELECT ts_ns, status, dur_ns FROM calls WHERE dur_ns IS NULL "
                             "ORDER BY ts_ns"),
            (std::vector<std::vector<std::string>>{{"1774015573212769041", "untimed", "NULL"},
                                                   {"1774015573213822246", "untimed", "NULL"}}));
  std::string out = explain_text(path);
  EXPECT_EQ(out.find("18446744073"), std::string::npos) << out;
  EXPECT_NE(out.find("; 2 events whose duration is negative or ends past 2262 are read without "
                     "one: counted, not timed"),
            std::string::npos)
      << out;
  std::string json, err;
  ASSERT_EQ(
      test::run_command({INGERO_BIN, "report", "--db", path, "--json", "-o", "-"}, &json, &err), 0)
      << err;
  auto report = nlohmann::json::parse(json);
  bool found = false;
  for (const auto& op : report["ops"]) {
    if (op["op"] != "cudaStreamSync") continue;
    found = true;
    EXPECT_EQ(op["max_ns"], 93587);
    EXPECT_EQ(op["p99_ns"], 93587);
  }
  EXPECT_TRUE(found);
}

// Found by a hostile-testing helper: a cudaStreamSync of INT64_MAX ns failed the report
// ("per-process totals: integer overflow") and ended explain's span in 2262. A call that would
// end past the clock's last instant has no duration: the span, the folded calls and the op's
// figures are the undamaged file's, and the report prints.
TEST(LegacyFiles, AnImpossibleDurationIsNone) {
  std::string path = damaged_copy("int64-max-duration.db",
                                  "UPDATE events SET duration = 9223372036854775807 WHERE id = 4");
  {
    auto f = analyze_file(path);
    EXPECT_EQ(f.a.span, (std::pair<int64_t, int64_t>{1774015573210657601, 1774015650154142554}));
    EXPECT_EQ(f.reader->legacy_nested_calls(), 26);
    const auto& s = overall(f.a, "cudaStreamSync");
    EXPECT_EQ(s.count, 21u);
    EXPECT_EQ(s.max_ns, 93587u);
    EXPECT_EQ(s.p99, 93587u);
  }
  std::string out, err;
  EXPECT_EQ(
      test::run_command({INGERO_BIN, "report", "--db", path, "--json", "-o", "-"}, &out, &err), 0)
      << err;
  out = explain_text(path);
  EXPECT_NE(out.find("(2026-03-20 14:06:13 UTC \u2192 2026-03-20 14:07:30 UTC)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("; 1 event whose duration is negative or ends past 2262 is read without "
                     "one: counted, not timed"),
            std::string::npos)
      << out;
}

// Found by a hostile-testing helper: the file's first call stamped 0 (1970) made explain's
// span 1774015650 s and its one step of 56 years "GPU idle >= 100%". A row at or before the
// epoch has no time: the file reads as it would without the row, and explain says so.
TEST(LegacyFiles, AnEventAtTheEpochIsLeftOut) {
  std::string at_zero = damaged_copy("at-epoch.db", "UPDATE events SET timestamp = 0 WHERE id = 2");
  std::string without = damaged_copy("without-row.db", "DELETE FROM events WHERE id = 2");
  auto damaged = analyze_file(at_zero);
  auto clean = analyze_file(without);
  EXPECT_EQ(damaged.a.span, clean.a.span);
  EXPECT_EQ(damaged.a.span.first, 1774015573210678554);  // the next event's (a cuMemAlloc)
  EXPECT_EQ(damaged.a.events, clean.a.events);
  EXPECT_EQ(damaged.reader->legacy_nested_calls(), clean.reader->legacy_nested_calls());
  EXPECT_EQ(overall(damaged.a, "cudaMalloc").count, 6u);
  const engine::StepSeries* d = damaged.a.steps.find(2233);
  const engine::StepSeries* c = clean.a.steps.find(2233);
  ASSERT_TRUE(d && c);
  EXPECT_EQ(d->steps.size(), c->steps.size());
  EXPECT_EQ(d->summary.gpu_idle, c->summary.gpu_idle);
  EXPECT_LT(d->summary.gpu_idle, 1.0);
  std::string out = explain_text(at_zero);
  EXPECT_NE(out.find("; 1 event stamped at or before 1970 (no time) is left out"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("GPU idle \u2265 100%"), std::string::npos) << out;
}

}  // namespace
}  // namespace ingero::app
