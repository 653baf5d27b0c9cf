// `ingero merge` keeps what its inputs lost: each node's session counters and the libraries
// attached late (each said once). A merged file that read as complete where its inputs were not
// would be a quiet wrong answer.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

// One node's trace: 50 cudaMalloc calls, then a session end with `lost`; `late` is a library
// attached while pid 42 had it mapped.
void write_node(const std::string& path, const std::string& node, const SessionCounters& lost,
                bool late) {
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = node;
  ASSERT_TRUE((*w)->begin_session(si));
  if (late) {
    LibraryRow l;
    l.backend = "cuda";
    l.vendor = "nvidia";
    l.api = "cuda_runtime";
    l.path = "/opt/venv/nvidia/cuda_runtime/lib/libcudart.so.13";
    l.probes_attached = 11;
    l.late_pid = 42;
    l.late_ns = 1'500'000;
    ASSERT_TRUE((*w)->add_library(l));
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE((*w)->add(test::runtime_call(1000 + uint64_t(i) * 1000, 10, 42, 42,
                                             hal::EventKind::kAlloc, "cudaMalloc")));
  }
  SessionEnd end;
  end.counters = lost;
  end.exit_reason = "test";
  ASSERT_TRUE((*w)->finish(end));
}

TEST(MergeLosses, EachNodesLossesAndLateLibrariesSurviveTheMerge) {
  // (Also: each merged session's end and its own event count.)
  std::string a = test::temp_path("node-a.db"), b = test::temp_path("node-b.db");
  SessionCounters la, lb;
  la.call_drops = 5;
  la.lost_calls = 2;
  la.store_errors = 3;
  lb.host_drops = 7;
  lb.calls_lost_at_exit = 1;
  write_node(a, "node-a", la, true);
  write_node(b, "node-b", lb, false);
  std::string merged = test::temp_path("merged.db"), err, out;
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", merged}, nullptr, &err), 0) << err;
  EXPECT_EQ(test::query_rows(merged,
                             "SELECT node, call_drops, lost_calls, calls_lost_at_exit, host_drops, "
                             "ringbuf_drops, store_errors FROM sessions ORDER BY node"),
            (std::vector<std::vector<std::string>>{{"node-a", "5", "2", "0", "0", "5", "3"},
                                                   {"node-b", "0", "0", "1", "7", "7", "0"}}));
  // Each merged session is ended, as its source was (or at its last event), with its own events:
  // a session without a stop time reads as a trace still being written.
  EXPECT_EQ(
      test::query_rows(merged,
                       "SELECT node, events_stored, stopped_at > 0, exit_reason FROM sessions "
                       "ORDER BY node"),
      (std::vector<std::vector<std::string>>{{"node-a", "50", "1", "merged"},
                                             {"node-b", "50", "1", "merged"}}));
  EXPECT_EQ(test::query_rows(merged,
                             "SELECT s.node, l.late_pid, l.late_ns FROM libraries l JOIN sessions "
                             "s ON s.id = l.session_id WHERE l.late_pid <> 0"),
            (std::vector<std::vector<std::string>>{{"node-a", "42", "1500000"}}));
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", merged, "--json"}, &out, &err), 0)
      << err;
  auto l = nlohmann::json::parse(out)["losses"];
  EXPECT_EQ(l["calls_lost"], 5 + 2 + 1) << l.dump();
  EXPECT_EQ(l["host_drops"], 7);
  EXPECT_EQ(l["store_errors"], 3);
  ASSERT_EQ(l["late_libraries"].size(), 1u) << l.dump();
  EXPECT_EQ(l["late_libraries"][0]["pid"], 42);
  EXPECT_TRUE(l["lower_bounds"].get<bool>());
}

// A library that two backends probe (libnccl: NCCL's API and its static copy of the CUDA
// runtime) has a row of each in `libraries`; attached late, it is said once per process. An
// H200 trace said "libnccl.so.2 attached 23.1ms after pid 1080 loaded it" twice.
TEST(MergeLosses, ALibraryOfTwoBackendsAttachedLateIsSaidOnce) {
  std::string db = test::temp_path("late-twice.db");
  {
    auto w = TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->begin_session(SessionInfo{}));
    for (const char* api : {"nccl", "cuda_runtime"}) {
      LibraryRow l;
      l.backend = api;
      l.vendor = "nvidia";
      l.api = api;
      l.path = "/usr/lib/x86_64-linux-gnu/libnccl.so.2";
      l.late_pid = 42;
      l.late_ns = std::string(api) == "nccl" ? 23'100'000 : 23'000'000;
      ASSERT_TRUE((*w)->add_library(l));
    }
    ASSERT_TRUE(
        (*w)->add(test::runtime_call(1000, 10, 42, 42, hal::EventKind::kAlloc, "cudaMalloc")));
    SessionEnd end;
    end.exit_reason = "test";
    ASSERT_TRUE((*w)->finish(end));
  }
  std::string out, err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out, &err), 0) << err;
  auto l = nlohmann::json::parse(out)["losses"]["late_libraries"];
  ASSERT_EQ(l.size(), 1u) << l.dump();
  EXPECT_EQ(l[0]["pid"], 42);
  EXPECT_EQ(l[0]["late_ns"], 23'100'000);
  ASSERT_EQ(test::run_command({INGERO_BIN, "explain", "--db", db}, &out, &err), 0) << err;
  size_t first = out.find("libnccl.so.2 attached");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_EQ(out.find("libnccl.so.2 attached", first + 1), std::string::npos) << out;
}

// The same trace given twice (a file and its copy) would double every count: refused, and no
// output is left.
TEST(MergeLosses, TheSameTraceTwiceIsRefused) {
  std::string a = test::temp_path("node-a.db"), copy = test::temp_path("node-a-copy.db");
  write_node(a, "node-a", {}, false);
  std::filesystem::copy_file(a, copy);
  std::string merged = test::temp_path("twice.db"), err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "merge", a, copy, "-o", merged}, nullptr, &err), 1)
      << err;
  EXPECT_NE(err.find(copy + ": the session of node node-a started at "), std::string::npos) << err;
  EXPECT_NE(err.find(") is also in " + a + ": merging both would count its calls twice"),
            std::string::npos)
      << err;
  EXPECT_FALSE(std::filesystem::exists(merged));
}

// A trace whose older blocks were folded for good (tiered retention, `--full-rows`, which is on
// by default: every trace longer than 10 minutes) has launches with no row: merge, which copies
// rows, is refused as the documentation says, naming the runs, where it said the file was
// damaged ("N calls counted by the file's per-second summaries were not read").
TEST(MergeLosses, ATraceFoldedForGoodIsRefusedAndSaidToBe) {
  std::string path = test::temp_path("folded.db");
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    (*w)->set_block_rows(64);
    (*w)->set_folding(true);
    SessionInfo si;
    si.node = "node-f";
    ASSERT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < 640; ++i) {
      hal::Event e = test::runtime_call(1000 + uint64_t(i) * 1000, 10, 42, 42,
                                        hal::EventKind::kLaunch, "cudaLaunchKernel");
      e.timed = false;
      ASSERT_TRUE((*w)->add(e));
    }
    auto folded = (*w)->fold_blocks(INT64_MAX, 320);
    ASSERT_TRUE(folded) << folded.error().message;
    ASSERT_GT(*folded, 0u);
    SessionEnd end;
    end.exit_reason = "test";
    ASSERT_TRUE((*w)->finish(end));
  }
  int64_t runs = test::query_int(path, "SELECT sum(runs) FROM call_store WHERE full IS NULL");
  ASSERT_GT(runs, 0);
  std::string merged = test::temp_path("folded-merged.db"), err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "merge", path, "-o", merged}, nullptr, &err), 1);
  EXPECT_EQ(err, "ingero merge: " + path + ": " + std::to_string(runs) +
                     " runs of folded launches (tiered retention); merge keeps every call's "
                     "row, so it takes traces recorded with --keep-all or before folding began\n");
  EXPECT_FALSE(std::filesystem::exists(merged));
}

}  // namespace
}  // namespace ingero::store
