// `explain`, `export` and `query` over a ClickHouse the trace was shipped to
// (fleet/clickhouse_source.h): the same answers as from the file.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "fleet/ch_schema.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/fleet/fleet_support.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::test {
namespace {

// An SQL change to a trace file of schema 4 (calls as rows).
void alter(const std::string& db, const std::string& sql) {
  std::string err;
  EXPECT_EQ(run_command({"sqlite3", db, sql}, nullptr, &err), 0) << sql << ": " << err;
}

TEST(FleetSource, ExplainAndExportOverClickHouseEqualTheFile) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("demo.db"), out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "demo", "nccl-straggler", "--db", db}, &out, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  EXPECT_NE(out.find("ClickHouse has every row of the file"), std::string::npos) << out;
  std::string from_file, from_ch;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0);
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &from_ch, &err),
            0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  EXPECT_EQ(b["node"], "demo");
  for (auto* j : {&a, &b}) {
    j->erase("trace");
    j->erase("node");
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["chains"][0]["rule"], "collective_straggler");
  // The Perfetto export too, byte for byte.
  ASSERT_EQ(run_command({INGERO_BIN, "export", "--db", db}, &from_file, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "export", "--source", ch.source(0, "ingero")}, &from_ch, &err),
            0)
      << err;
  EXPECT_GT(from_file.size(), 100000u);
  EXPECT_EQ(from_file, from_ch);
}

// Three ranks of the real H100 NCCL trace on three nodes, the second's clock an hour ahead:
// --since counted back from that node's own end, on the nodes' own clocks, so each report was
// empty ("0 events over 0 s"). The window is now taken on the reference clock, after the
// offsets are removed, as export took it.
TEST(FleetSource, AWindowOfASkewedFleetIsOnTheReferenceClock) {
  START_SERVERS(ch, 1);
  std::string out, err;
  for (int n = 1; n <= 3; ++n) {
    std::string db = temp_path("sq-" + std::to_string(n) + ".db");
    ASSERT_TRUE(unpack_fixture("h100/nccl-1rank", db));
    const std::string node = "'sq-" + std::to_string(n) + "'";
    const std::string ahead = n == 2 ? " + 3600000000000" : "";
    alter(db, "UPDATE sessions SET node = " + node + ", started_at = started_at" + ahead +
                  ", stopped_at = stopped_at" + ahead);
    alter(db, "UPDATE events SET node = " + node + ", timestamp = timestamp" + ahead);
    alter(db, "UPDATE events SET rank = " + std::to_string(n - 1) +
                  ", nranks = 3 WHERE rank IS NOT NULL");
    ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "skew")}, &out,
                          &err),
              0)
        << err;
  }
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "skew"), "--since", "10s"},
                        &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("sq-2: +3600000.000 ms"), std::string::npos) << out;
  // Every node's 908 events fall in the last 10 s of the reference clock.
  for (const char* node : {"sq-1", "sq-2", "sq-3"}) {
    size_t at = out.find(std::string("[node ") + node + "]");
    ASSERT_NE(at, std::string::npos) << node << "\n" << out;
    EXPECT_EQ(out.substr(out.find('\n', at) + 1, 16), "908 events over ") << node << "\n" << out;
  }
}

// A session of node-u: process 4001 makes 64 launches, one in four timed (40 us + i ns), and
// 16 syncs; process 4002 makes 8 launches, none timed. As `ingero trace` leaves launches
// (seen at entry, one in N timed through its return; docs/architecture.md).
void write_untimed_session(const std::string& path) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = si.host = "node-u";
  si.started_at_ns = kBeforeMidnight;
  si.mono_offset_ns = kBeforeMidnight - 1'000'000'000;
  ASSERT_TRUE((*w)->begin_session(si));
  auto call = [&](uint32_t pid, int i, bool launch, bool timed) {
    hal::Event e;
    e.ts_ns = uint64_t(1'000'000'000 + int64_t(i) * 100'000);
    e.pid = e.tid = pid;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = launch ? "cudaLaunchKernel" : "cudaStreamSynchronize";
    e.kind = launch ? hal::EventKind::kLaunch : hal::EventKind::kSync;
    e.timed = timed;
    if (timed) {
      e.dur_ns = launch ? 40'000 + uint64_t(i) : 2'000'000;
      e.has_ret = true;
      e.ret = 0;
    }
    return (*w)->add(e);
  };
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(call(4001, i, true, i % 4 == 0));
    if (i % 4 == 3) {
      ASSERT_TRUE(call(4001, i, false, true));
    }
  }
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(call(4002, 64 + i, true, false));
  store::SessionEnd end;
  end.stopped_at_ns = kBeforeMidnight + 2'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
}

// Found by a helper checking the fleet's figures: ClickHouse's `events.dur_ns` is UInt64, so a
// launch seen at entry only read 0 ns there. The fleet's `calls` view gave it 0 (not NULL, as
// the file's view does: avg(dur_ns) 4x too low at one launch in four timed), and `explain
// --source` read it as 0 ns where the file's reader gives it its process's timed mean. A
// database whose views an earlier build made gets this build's views when a shipper starts.
TEST(FleetSource, EntryOnlyLaunchesReadAsTheFileReadsThem) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("untimed.db"), out, err, from_file, from_ch;
  write_untimed_session(db);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  const std::string src = ch.source(0, "ingero");
  const std::string sql =
      "SELECT pid, count(*) AS n, count(dur_ns) AS timed, sum(dur_ns) AS ns FROM calls WHERE op = "
      "'cudaLaunchKernel' GROUP BY pid ORDER BY pid";
  ASSERT_EQ(run_command({INGERO_BIN, "query", db, "--json", sql}, &from_file, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src, "--json", sql}, &from_ch, &err), 0)
      << err;
  const auto want = nlohmann::json::parse(
      R"([{"pid":4001,"n":64,"timed":16,"ns":640480},{"pid":4002,"n":8,"timed":0,"ns":null}])");
  EXPECT_EQ(nlohmann::json::parse(from_file), want) << from_file;
  EXPECT_EQ(nlohmann::json::parse(from_ch), want) << from_ch;
  // explain: 4001's untimed launches at its mean (40,030 ns), 4002's at the node's.
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", src, "--json"}, &from_ch, &err), 0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  // The file's latency quantiles come from its summaries' sketches, ClickHouse's are exact.
  for (auto* j : {&a, &b}) {
    for (const char* k : {"trace", "node", "quantiles"}) j->erase(k);
    for (auto& n : (*j)["nodes"]) n.erase("quantiles");
    for (auto& s : (*j)["stats"])
      for (const char* k : {"p50_ns", "p95_ns", "p99_ns"}) s.erase(k);
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["stats"][0]["avg_ns"], 40030);
  EXPECT_EQ(b["tenants"]["tenants"][0]["api_ns"], 72 * 40030 + 16 * 2'000'000);
  // A database made by an earlier build: its calls view gave dur_ns as stored.
  std::string old_view = fleet::view_select("ingero", fleet::View::kCalls);
  const std::string now = "if(status = 'untimed', NULL, dur_ns) AS dur_ns";
  ASSERT_NE(old_view.find(now), std::string::npos);
  old_view.replace(old_view.find(now), now.size(), "dur_ns");
  ch.query(0, "DROP TABLE ingero.calls");
  ch.query(0, "CREATE VIEW ingero.calls AS " + old_view);
  EXPECT_EQ(ch.query(0,
                     "SELECT type FROM system.columns WHERE database = 'ingero' AND table = "
                     "'calls' AND name = 'dur_ns'"),
            "UInt64\n");
  EXPECT_EQ(ch.query_int(0, "SELECT count(dur_ns) FROM ingero.calls"), 88);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  EXPECT_EQ(ch.query(0,
                     "SELECT type FROM system.columns WHERE database = 'ingero' AND table = "
                     "'calls' AND name = 'dur_ns'"),
            "Nullable(UInt64)\n");
  EXPECT_EQ(ch.query_int(0, "SELECT count(dur_ns) FROM ingero.calls"), 32);
}

// Found by a hostile-testing helper (helper-78): the ClickHouse source gave no on-CPU samples,
// so explain --source placed a host gap by the calls around it ("before main") where the file's
// samples said where the thread was ("in clock_gettime", with its stack). A training loop
// whose thread works 8 ms a step in SlowDS.__getitem__, sampled every millisecond.
TEST(FleetSource, OnCpuSamplesPlaceAHostGapAsTheFileDoes) {
  START_SERVERS(ch, 1);
  auto loop = store::tiers_fixture::training_loop(40);
  std::string db = store::tiers_fixture::write_trace("samples.db", loop.calls), out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  std::string from_file, from_ch;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0) << err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &from_ch, &err),
            0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  ASSERT_FALSE(a["chains"].empty());
  ASSERT_FALSE(b["chains"].empty());
  EXPECT_EQ(b["chains"][0]["rule"], a["chains"][0]["rule"]);
  EXPECT_EQ(b["chains"][0]["summary"], a["chains"][0]["summary"]);
  EXPECT_NE(b["chains"][0]["summary"].get<std::string>().find("SlowDS.__getitem__ (train.py:15)"),
            std::string::npos)
      << b["chains"][0]["summary"];
  EXPECT_EQ(b["steps"][0]["summary"]["gap_where"], a["steps"][0]["summary"]["gap_where"]);
}

// A session of node-a with 10 calls (5 launches, 5 syncs), shipped to database `ingero`.
void ship_ten_calls(const ClickHouseServers& ch) {
  std::string db = temp_path("trace.db"), out, err;
  write_session(db, "node-a", kBeforeMidnight, 10, kMs);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
}

// fleet.md advises readers a user with `readonly` in its profile, and every read of such a user
// failed: readonly=1 may change no setting (ours: compression, row and time limits, readonly
// itself), readonly=2 not readonly. Both read as the default user does, and still write
// nothing.
TEST(FleetQuery, UsersWithAReadOnlyProfileRead) {
  START_SERVERS(ch, 1);
  std::string out, err;
  ship_ten_calls(ch);
  const std::string port = ch.source(0, "ingero").substr(std::string("clickhouse://").size());
  std::string explained;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &explained, &err),
            0)
      << err;
  for (const char* user : {"reader1", "reader2"}) {
    SCOPED_TRACE(user);
    const std::string src = "clickhouse://" + std::string(user) + "@" + port;
    ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src,
                           "SELECT op, count() AS n FROM calls GROUP BY op ORDER BY op;  "},
                          &out, &err),
              0)
        << err;
    EXPECT_EQ(out, "op\tn\ncudaLaunchKernel\t5\ncudaStreamSynchronize\t5\n");
    ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src, "--json", "--limit", "2",
                           "SELECT src_id FROM events ORDER BY src_id"},
                          &out, &err),
              0)
        << err;
    // readonly=1 allows no setting, and ClickHouse's JSON quotes 64-bit integers by default.
    EXPECT_EQ(
        nlohmann::json::parse(out),
        nlohmann::json::parse(std::string(user) == "reader1" ? R"([{"src_id":"1"},{"src_id":"2"}])"
                                                             : R"([{"src_id":1},{"src_id":2}])"));
    ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", src, "--json"}, &out, &err), 0)
        << err;
    EXPECT_EQ(nlohmann::json::parse(out)["stats"], nlohmann::json::parse(explained)["stats"]);
    EXPECT_EQ(run_command({INGERO_BIN, "query", "--source", src, "DROP TABLE events"}, &out, &err),
              1);
  }
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 10);
}

TEST(FleetQuery, ReadOnlyStreamedTsvAndJson) {
  START_SERVERS(ch, 1);
  std::string out, err;
  ship_ten_calls(ch);
  std::string src = ch.source(0, "ingero");
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src,
                         "SELECT op, count() AS n FROM calls GROUP BY op ORDER BY op"},
                        &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "op\tn\ncudaLaunchKernel\t5\ncudaStreamSynchronize\t5\n");
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--source", src, "--json", "--limit", "2",
                         "SELECT src_id, comm FROM events ORDER BY src_id"},
                        &out, &err),
            0);
  EXPECT_EQ(nlohmann::json::parse(out),
            nlohmann::json::parse(R"([{"src_id":1,"comm":"rank\t\"x\""},)"
                                  R"({"src_id":2,"comm":"rank\t\"x\""}])"));
  EXPECT_NE(err.find("truncated at row limit 2"), std::string::npos);
  for (const char* sql : {"DROP TABLE events", "INSERT INTO events (node) VALUES ('x')",
                          "SELECT 1 SETTINGS readonly = 0"}) {
    EXPECT_EQ(run_command({INGERO_BIN, "query", "--source", src, sql}, &out, &err), 1) << sql;
    EXPECT_NE(err.find("readonly"), std::string::npos) << sql << ": " << err;
  }
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.events"), 10);
}

// Found by a hostile-testing helper: a statement ClickHouse failed after sending rows (a time
// limit, throwIf) exited 0, its output cut short and the server's exception printed as its last
// row ("Code: 395, e.displayText() = DB::Exception: ..."), the JSON array invalid. It is exit 1,
// the exception on stderr, and the rows sent before it printed, none of it among them.
TEST(FleetQuery, AStatementFailedAfterItsRowsIsAnErrorNotARow) {
  START_SERVERS(ch, 1);
  ship_ten_calls(ch);
  std::string src = ch.source(0, "ingero");
  const std::string sql =
      "SELECT number, throwIf(number = 3000000) AS t FROM system.numbers LIMIT 10000000";
  for (bool json : {false, true}) {
    SCOPED_TRACE(json);
    std::vector<std::string> argv = {INGERO_BIN, "query", "--source", src, "--limit", "20000000"};
    if (json) argv.push_back("--json");
    argv.push_back(sql);
    std::string out, err;
    EXPECT_EQ(run_command(argv, &out, &err), 1);
    EXPECT_NE(err.find("ingero query: ClickHouse failed the statement after sending rows (they "
                       "were cut short): Code: 395"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("Value passed to 'throwIf' function is non zero"), std::string::npos) << err;
    EXPECT_EQ(out.find("DB::Exception"), std::string::npos);
    ASSERT_GT(out.size(), 1000u) << "no row came before the exception";
    if (json) {
      EXPECT_TRUE(nlohmann::json::accept(out)) << out.substr(out.size() - 200);
    }
  }
}

namespace {

// A launch-bound loop of pid 42 on node "gpu-node" (60 steps of 2.13 ms: 200 launches, then a
// loss read) with NVML samples of it at 9% and an Xid during the loop.
void write_device_trace(const std::string& path) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  constexpr int64_t kStart = 1'800'000'000'000'000'000, kStep = 2'130'000;
  store::SessionInfo si;
  si.node = si.host = "gpu-node";
  si.started_at_ns = kStart;
  si.mono_offset_ns = kStart;  // monotonic 0 = the session's start
  ASSERT_TRUE((*w)->begin_session(si));
  auto call = [&](int64_t ts, int64_t dur, hal::EventKind kind, const char* op) {
    hal::Event e = runtime_call(uint64_t(ts), uint64_t(dur), 42, 42, kind, op);
    e.set(hal::Field::kStream, 0);
    return e;
  };
  for (int s = 0; s < 60; ++s) {
    int64_t t = int64_t(s) * kStep;
    for (int k = 0; k < 200; ++k)
      ASSERT_TRUE(
          (*w)->add(call(t + k * 10'000, 6'000, hal::EventKind::kLaunch, "cudaLaunchKernel")));
    hal::Event copy = call(t + 2'050'000, 10'000, hal::EventKind::kMemcpy, "cudaMemcpyAsync");
    copy.set(hal::Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    ASSERT_TRUE((*w)->add(copy));
    ASSERT_TRUE(
        (*w)->add(call(t + 2'062'000, 20'000, hal::EventKind::kSync, "cudaStreamSynchronize")));
  }
  std::vector<hal::DeviceSample> rows;
  for (int64_t t = 20'000'000; t <= 60 * kStep + 20'000'000; t += 20'000'000) {
    hal::DeviceSample d;
    d.ts_ns = kStart + t;
    d.period_ns = 20'000'000;
    d.source = "nvml";
    d.uuid = "GPU-fleet-0";
    d.sm_util = 30;
    d.temperature_c = 44;
    rows.push_back(d);
    d.pid = 42;
    d.sm_util = 9;
    d.temperature_c.reset();
    rows.push_back(d);
  }
  ASSERT_TRUE((*w)->add_device_samples(rows));
  ASSERT_TRUE((*w)->add_device_events({{kStart + 30 * kStep, "nvml", 0, "GPU-fleet-0", "xid", 13,
                                        "Xid 13 (Graphics Engine Exception)"}}));
  store::SessionEnd end;
  end.stopped_at_ns = kStart + 60 * kStep + 1'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
}

}  // namespace

// The device side channel's rows ship like the others, NULLs as NULLs, and explain over
// ClickHouse measures the steps and finds the Xid as the file does.
TEST(FleetSource, DeviceRowsShipAndExplainAlike) {
  START_SERVERS(ch, 1);
  std::string db = temp_path("device.db"), out, err;
  write_device_trace(db);
  ASSERT_EQ(run_command({INGERO_BIN, "ship", "--db", db, "--clickhouse", ch.url(0, "ingero")}, &out,
                        &err),
            0)
      << err;
  expect_exact(ch, 0, "ingero", db);
  EXPECT_EQ(ch.query_int(0, "SELECT count() FROM ingero.device_samples"),
            query_int(db, "SELECT count(*) FROM device_samples"));
  EXPECT_EQ(ch.query_int(0, "SELECT countIf(isNull(temperature_c)) FROM ingero.device_samples"),
            query_int(db, "SELECT count(*) FROM device_samples WHERE temperature_c IS NULL"));
  EXPECT_EQ(ch.query_int(0, "SELECT code FROM ingero.device_events WHERE kind = 'xid'"), 13);
  std::string from_file, from_ch;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &from_file, &err), 0);
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--source", ch.source(0, "ingero"), "--json"},
                        &from_ch, &err),
            0)
      << err;
  auto a = nlohmann::json::parse(from_file), b = nlohmann::json::parse(from_ch);
  ASSERT_EQ(a["steps"].size(), 1u);
  EXPECT_EQ(a["steps"][0]["summary"]["gpu_text"], "GPU busy 9% (NVML)");
  EXPECT_EQ(b["steps"][0]["summary"]["gpu_text"], a["steps"][0]["summary"]["gpu_text"]);
  auto rules = [](const nlohmann::json& j) {
    std::vector<std::string> r;
    for (const auto& c : j["chains"])
      r.push_back(c["rule"].get<std::string>() + "/" + c["severity"].get<std::string>());
    return r;
  };
  EXPECT_EQ(rules(a), rules(b));
  EXPECT_EQ(rules(a).front(), "launch_bound/HIGH");
  bool xid = false;
  for (const auto& c : b["chains"]) xid |= c["rule"] == "device_error";
  EXPECT_TRUE(xid) << from_ch;
}

}  // namespace
}  // namespace ingero::test
