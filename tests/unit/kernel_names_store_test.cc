// Kernel names in the trace file (store/kernel_names.h): stored once per (node, pid, func),
// joined into calls.kernel and the vendor views (across blocks too), counted in the sessions
// row, carried by `ingero merge`, NULL in files that have none; and read back by the MCP tool
// get_kernels and the report's "kernels per step" section.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "app/builtin_backends.h"
#include "app/mcp_host.h"
#include "engine/kernels.h"
#include "serve/mcp/server.h"
#include "serve/report/report_model.h"
#include "store/compact.h"
#include "store/plain_copy.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/builtin_tool_host.h"
#include "tests/support/trace_db.h"

namespace ingero {
namespace {

using hal::EventKind;
using hal::Field;
using hal::KernelNameSource;
using Rows = std::vector<std::vector<std::string>>;
using test::query_int;
using test::query_rows;

constexpr int64_t kOffset = 1'700'000'000'000'000'000;

hal::Event launch(uint64_t ts, uint64_t func, uint32_t pid = 100) {
  hal::Event e = test::runtime_call(ts, 2000, pid, pid, EventKind::kLaunch, "cudaLaunchKernel");
  e.set(Field::kFunc, func);
  return e;
}

// pid 100 launches mul 3 times, add<float> twice and an unnamed function once, then syncs;
// mul is named a second time differently (a reused pid would do that): the first name stays.
// `small_blocks`: two calls a block, so that names join across the call store's blocks.
std::string write_trace(const std::string& name, bool small_blocks = false) {
  std::string path = test::temp_path(name);
  auto w = store::TraceWriter::open(path, app::builtin_views());
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  if (small_blocks) (*w)->set_block_rows(2);
  store::SessionInfo si;
  si.node = "gpu-7";
  si.mono_offset_ns = kOffset;
  EXPECT_TRUE((*w)->begin_session(si));
  EXPECT_TRUE((*w)->on_process(100, "trainer", "python train.py", 0));
  EXPECT_TRUE((*w)->on_kernel_name({100, 0x10, "mul", "mul", KernelNameSource::kRegistration, 5}));
  EXPECT_TRUE((*w)->on_kernel_name({100, 0x20, "void add<float>(float*, int)", "_Z3addIfEvPT_i",
                                    KernelNameSource::kElfSymbol, 6}));
  EXPECT_TRUE(
      (*w)->on_kernel_name({100, 0x10, "other", "other", KernelNameSource::kDriverLookup, 7}));
  EXPECT_TRUE((*w)->on_kernel_name({100, 0x10, "mul", "mul", KernelNameSource::kDriverLookup, 8}));
  uint64_t t = 1'000'000;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*w)->add(launch(t += 10'000, 0x10)));
  for (int i = 0; i < 2; ++i) EXPECT_TRUE((*w)->add(launch(t += 10'000, 0x20)));
  EXPECT_TRUE((*w)->add(launch(t += 10'000, 0x30)));
  // Another process's launch of the same address is not named by pid 100's name.
  EXPECT_TRUE((*w)->add(launch(t += 10'000, 0x10, 200)));
  auto sync =
      test::runtime_call(t += 10'000, 5000, 100, 100, EventKind::kSync, "cudaStreamSynchronize");
  sync.set(Field::kFunc, 0x10);  // never a launch: never named
  EXPECT_TRUE((*w)->add(sync));
  EXPECT_TRUE((*w)->update_kernel_naming({2, 2, 2, 1, 0, 0}));
  store::SessionEnd end;
  end.exit_reason = "test";
  // The tracer's counters: one of the unnamed functions was first launched while its kernel
  // look-ups rested (not a column: read back from here).
  end.bpf_stats_json = R"({"calls": 8, "unnamed_functions_at_rest": 1})";
  end.stopped_at_ns = kOffset + int64_t(t);
  EXPECT_TRUE((*w)->finish(end));
  return path;
}

const Rows kCallsByKernel = {{"cudaLaunchKernel", "100", "NULL", "1"},
                             {"cudaLaunchKernel", "100", "mul", "3"},
                             {"cudaLaunchKernel", "100", "void add<float>(float*, int)", "2"},
                             {"cudaLaunchKernel", "200", "NULL", "1"},
                             {"cudaStreamSynchronize", "100", "NULL", "1"}};

Rows calls_by_kernel(const std::string& db) {
  return query_rows(db,
                    "SELECT op, pid, coalesce(kernel, 'NULL'), count(*) FROM calls GROUP BY 1, 2, "
                    "3 ORDER BY 1, 2, 3");
}

TEST(KernelNamesStore, NamesAreStoredOnceAndJoinedIntoCallsAndTheVendorViews) {
  std::string db = write_trace("names.db");
  EXPECT_EQ(calls_by_kernel(db), kCallsByKernel);
  EXPECT_EQ(query_rows(db,
                       "SELECT node, pid, func, name, raw_name, source, seen_at FROM "
                       "kernel_names ORDER BY func"),
            (Rows{{"gpu-7", "100", "16", "mul", "mul", "registration", std::to_string(kOffset + 5)},
                  {"gpu-7", "100", "32", "void add<float>(float*, int)", "_Z3addIfEvPT_i",
                   "elf_symbol", std::to_string(kOffset + 6)}}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM cuda_events WHERE kernel = 'mul'"), 3);
  EXPECT_EQ(query_rows(db,
                       "SELECT kernels_named, unnamed_launches, unnamed_functions, "
                       "unreadable_kernel_names, kernel_name_conflicts FROM sessions"),
            (Rows{{"2", "2", "2", "1", "1"}}));
  // For tools other than ingero: the plain copy `ingero export --format sqlite` writes, whose
  // own views join the names too.
  std::string plain = test::temp_path("names-plain.db");
  auto copy = store::write_plain_copy(db, plain, app::builtin_views());
  ASSERT_TRUE(copy) << copy.error().message;
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open_v2(plain.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(raw, "SELECT count(*) FROM main.calls WHERE kernel = 'mul'", -1, &st,
                               nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(raw);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), 3);
  sqlite3_finalize(st);
  sqlite3_close(raw);
}

TEST(KernelNamesStore, CallsInSeveralBlocksAreNamed) {
  std::string db = write_trace("blocks.db", true);
  // Eight calls, two a block: four blocks of the call store.
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM call_store"), 4);
  EXPECT_EQ(query_int(db, "SELECT sum(calls) FROM call_store"), 8);
  EXPECT_EQ(calls_by_kernel(db), kCallsByKernel);
}

TEST(KernelNamesStore, AFileWithoutTheTableReadsNullKernelsAndTheEngineSaysNothing) {
  // Every file of schema 10 has the table (the migration creates it); a file of schema 9, as
  // the last build before it wrote one, has none: its calls read with a NULL kernel.
  std::string db = test::temp_path("v9-traced.db");
  ASSERT_TRUE(test::unpack_fixture("legacy/v9-traced", db));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE kernel IS NULL"),
            query_int(db, "SELECT count(*) FROM calls"));
  EXPECT_GT(query_int(db, "SELECT count(*) FROM calls"), 0);
  auto reader = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  EXPECT_TRUE(source.kernel_names(std::nullopt).empty());
  EXPECT_EQ(source.error(), "");
  // The original implementation's files: the column exists, NULL.
  std::string go = std::string(INGERO_FIXTURES_DIR) + "/ingero-go/sample-gpu-node-02.db";
  EXPECT_EQ(query_int(go, "SELECT count(*) FROM calls WHERE kernel IS NOT NULL"), 0);
}

TEST(KernelNamesStore, UnnamedFunctionsFirstLaunchedAtRestAreReadFromTheSessionsCounters) {
  std::string db = write_trace("rest.db");
  auto read = [&db] {
    auto r = store::TraceReader::open(db, app::builtin_views());
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    store::SqlTraceSource src(**r);
    return src.kernel_naming(std::nullopt);
  };
  auto n = read();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->unnamed_functions, 2u);
  EXPECT_EQ(n->at_rest, 1u);
  // A session row whose counters are not JSON (damaged, or another tool's) counts none.
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  EXPECT_EQ(
      sqlite3_exec(h, "UPDATE sessions SET bpf_stats = 'not json'", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(h);
  n = read();
  ASSERT_TRUE(n);
  EXPECT_EQ(n->unnamed_functions, 2u);
  EXPECT_EQ(n->at_rest, 0u);
}

TEST(KernelNamesStore, MergeCarriesNamesAndWhatCouldNotBeNamed) {
  std::string a = write_trace("a.db");
  std::string out = test::temp_path("merged.db");
  std::string o, e;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, "-o", out}, &o, &e), 0) << e;
  EXPECT_EQ(calls_by_kernel(out), kCallsByKernel);
  EXPECT_EQ(query_rows(out, "SELECT node, pid, func, name, source FROM kernel_names ORDER BY func"),
            (Rows{{"gpu-7", "100", "16", "mul", "registration"},
                  {"gpu-7", "100", "32", "void add<float>(float*, int)", "elf_symbol"}}));
  EXPECT_EQ(query_rows(out,
                       "SELECT sum(kernels_named), sum(unnamed_launches), "
                       "sum(unnamed_functions), sum(kernel_name_conflicts) FROM sessions"),
            (Rows{{"2", "2", "2", "1"}}));
}

TEST(KernelNamesStore, McpGetKernelsAndTheReportListThem) {
  std::string db = write_trace("mcp.db");
  serve::mcp::ToolContext ctx(db, test::builtin_tool_host());
  ASSERT_TRUE(ctx.validate());
  serve::mcp::Server server(ctx);
  serve::mcp::Session session;
  auto rpc = [&](const std::string& method, nlohmann::json params) {
    static int id = 0;
    nlohmann::json msg = {{"jsonrpc", "2.0"}, {"id", ++id}, {"method", method}, {"params", params}};
    auto r = server.handle(msg.dump(), session, nullptr);
    EXPECT_TRUE(r.has_value());
    return r ? *r : nlohmann::json();
  };
  rpc("initialize", {{"protocolVersion", serve::mcp::kLatestVersion},
                     {"capabilities", nlohmann::json::object()},
                     {"clientInfo", {{"name", "gtest"}, {"version", "1"}}}});
  auto r = rpc("tools/call", {{"name", "get_kernels"}, {"arguments", {{"pid", 100}}}})["result"];
  ASSERT_FALSE(r.value("isError", false)) << r.dump();
  const auto& s = r["structuredContent"];
  EXPECT_TRUE(s["named"].get<bool>());
  ASSERT_EQ(s["processes"].size(), 1u);
  const auto& p = s["processes"][0];
  EXPECT_EQ(p["pid"], 100);
  EXPECT_EQ(p["launches"], 6);
  EXPECT_EQ(p["unnamed_launches"], 1);
  ASSERT_EQ(p["kernels"].size(), 3u);
  EXPECT_EQ(p["kernels"][0]["name"], "mul");
  EXPECT_EQ(p["kernels"][0]["launches"], 3);
  EXPECT_EQ(p["kernels"][1]["name"], "add<float>");
  EXPECT_EQ(p["kernels"][1]["full_name"], "void add<float>(float*, int)");
  EXPECT_EQ(p["kernels"][2]["name"], "function 0x30");
  EXPECT_FALSE(p["kernels"][2]["named"].get<bool>());
  std::string text = r["content"][0]["text"];
  EXPECT_NE(text.find("1 launch (of 1 function) has no kernel name"), std::string::npos) << text;
  EXPECT_NE(text.find("trainer (pid 100): 6 launches of 3 kernels (1 launch of 1 unnamed "
                      "function)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  3 mul (3 per step)\n  2 \"add<float>\" (2 per step)\n"),
            std::string::npos)
      << text;

  // The steps list their kernels in both tools alike.
  auto sum_steps = [](const nlohmann::json& steps) {
    int64_t n = 0;
    for (const auto& st : steps)
      for (const auto& k : st.at("kernels")) n += k.at("launches").get<int64_t>();
    return n;
  };
  auto kernels_steps = rpc("tools/call", {{"name", "get_kernels"},
                                          {"arguments", {{"pid", 100}, {"steps", 200}}}})["result"];
  auto breakdown = rpc("tools/call", {{"name", "get_step_breakdown"},
                                      {"arguments", {{"pid", 100}, {"limit", 200}}}})["result"];
  const auto& kst = kernels_steps["structuredContent"]["processes"][0]["steps"];
  const auto& bst = breakdown["structuredContent"]["processes"][0]["steps"];
  ASSERT_FALSE(kst.empty()) << kernels_steps.dump();
  ASSERT_EQ(kst.size(), bst.size());
  EXPECT_EQ(sum_steps(kst), sum_steps(bst));
  EXPECT_GT(sum_steps(kst), 0);

  auto reader = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  serve::report::ReportOptions o;
  auto m = serve::report::build_report(**reader, source, o);
  ASSERT_TRUE(m) << m.error().message;
  const auto& k = (*m)["kernels"];
  EXPECT_TRUE(k["named"].get<bool>());
  EXPECT_EQ(k["unnamed_launches"], 2);  // pid 100's and pid 200's
  ASSERT_EQ(k["processes"].size(), 2u);
  EXPECT_EQ(k["processes"][0]["pid"], 100);
  EXPECT_EQ(k["processes"][0]["kernels"][0]["name"], "mul");
  EXPECT_EQ(k["processes"][0]["kernels"][0]["launches"], 3);
  EXPECT_EQ(k["processes"][0]["kernels"][0]["source"], "registration");
}

// Folding keeps a run's kernel when the run is of one: 1,000 launches of `mul` on one thread
// and 1,000 of `add` on another, seen at entry only (as the tracer sees all but one in 32),
// fold into a run of each, which the engine counts by kernel; a thread alternating the two
// folds into one run of both, which keeps how many launches of each (funcs), counted by
// kernel too.
TEST(KernelNamesStore, RunsKeepTheirKernel) {
  std::string path = test::temp_path("runs-kernels.db");
  {
    auto w = store::TraceWriter::open(path, app::builtin_views());
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.mono_offset_ns = kOffset;
    ASSERT_TRUE((*w)->begin_session(si));
    (*w)->set_folding(true);
    ASSERT_TRUE(
        (*w)->on_kernel_name({100, 0x10, "mul", "mul", KernelNameSource::kRegistration, 5}));
    ASSERT_TRUE(
        (*w)->on_kernel_name({100, 0x20, "add", "add", KernelNameSource::kRegistration, 6}));
    auto untimed = [](uint64_t ts, uint64_t func, uint32_t tid) {
      hal::Event e = launch(ts, func);
      e.tid = tid;
      e.timed = false;
      e.dur_ns = 0;
      e.has_ret = false;
      return e;
    };
    for (int i = 0; i < 1000; ++i) {
      uint64_t t = 1'000'000 + uint64_t(i) * 5000;
      ASSERT_TRUE((*w)->add(untimed(t, 0x10, 100)));
      ASSERT_TRUE((*w)->add(untimed(t + 1000, 0x20, 101)));
      if (i < 100) {
        ASSERT_TRUE((*w)->add(untimed(t + 2000, i % 2 ? 0x20 : 0x10, 102)));
      }
    }
    store::SessionEnd end;
    end.exit_reason = "test";
    end.stopped_at_ns = kOffset + 20'000'000;
    ASSERT_TRUE((*w)->finish(end));
  }
  // One block: its folded form holds three runs of all 2,100 launches; the run of both kernels
  // keeps how many launches of each.
  EXPECT_EQ(query_rows(path, "SELECT kept, runs, folded FROM call_store"),
            (Rows{{"0", "3", "2100"}}));
  auto reader = store::TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  Rows runs;
  source.call_runs(
      engine::Window{}, [](const hal::Event&) {},
      [&](const engine::CallRun& r) {
        runs.push_back({std::to_string(r.tid), r.func ? std::to_string(*r.func) : "NULL",
                        r.funcs.empty() ? "NULL" : std::string(r.funcs), std::to_string(r.calls)});
      });
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (Rows{{"100", "16", "NULL", "1000"},
                        {"101", "32", "NULL", "1000"},
                        {"102", "NULL", "16:50,+16:50", "100"}}));
  auto k = engine::compute_kernels(source, engine::Window{}, engine::StepModel{});
  ASSERT_EQ(k.processes.size(), 1u);
  EXPECT_EQ(k.processes[0].launches, 2100u);
  EXPECT_EQ(k.processes[0].folded_launches, 0u);
  EXPECT_EQ(k.processes[0].unnamed_launches, 0u);
  ASSERT_EQ(k.processes[0].kernels.size(), 2u);
  EXPECT_EQ(k.processes[0].kernels[0].launches, 1050u);
  EXPECT_EQ(k.processes[0].kernels[1].launches, 1050u);
  // Once the rows are gone (aged past --full-rows; here compact), SQL reads the same runs.
  std::string aged = test::temp_path("runs-kernels-aged.db");
  std::filesystem::copy_file(path, aged);
  auto folded = store::compact_trace(aged, 0, app::builtin_views());
  ASSERT_TRUE(folded) << folded.error().message;
  const Rows want = {{"100", "16", "NULL", "1000"},
                     {"101", "32", "NULL", "1000"},
                     {"102", "NULL", "16:50,+16:50", "100"}};
  const std::string sql =
      "SELECT tid, coalesce(func, 'NULL'), coalesce(funcs, 'NULL'), calls FROM call_runs "
      "ORDER BY tid";
  EXPECT_EQ(query_rows(aged, sql), want);
  // The plain copy `ingero export --format sqlite` writes keeps them as rows, and the engine
  // reads them there too.
  std::string plain = test::temp_path("runs-kernels-plain.db");
  auto copy = store::write_plain_copy(aged, plain, app::builtin_views());
  ASSERT_TRUE(copy) << copy.error().message;
  EXPECT_EQ(query_rows(plain, sql), want);
  auto plain_reader = store::TraceReader::open(plain, app::builtin_views());
  ASSERT_TRUE(plain_reader);
  store::SqlTraceSource plain_source(**plain_reader);
  auto pk = engine::compute_kernels(plain_source, engine::Window{}, engine::StepModel{});
  ASSERT_EQ(pk.processes.size(), 1u);
  EXPECT_EQ(pk.processes[0].folded_launches, 0u);
  ASSERT_EQ(pk.processes[0].kernels.size(), 2u);
  EXPECT_EQ(pk.processes[0].kernels[0].launches, 1050u);
  EXPECT_EQ(pk.processes[0].kernels[1].launches, 1050u);
  EXPECT_EQ(plain_source.error(), "");
}

}  // namespace
}  // namespace ingero
