// The report of a trace whose launches tiered retention folded into runs, and of one whose
// oldest calls retention deleted: counts, rates and windows as the engine reads them, and what
// was folded or deleted said as explain says it.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "app/builtin_backends.h"
#include "app/merge_traces.h"
#include "engine/analysis.h"
#include "engine/loss_notes.h"
#include "engine/window_spec.h"
#include "serve/report/report_model.h"
#include "store/compact.h"
#include "store/sql_trace_source.h"
#include "store/tiers.h"
#include "store/trace_writer.h"
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

// A folded trace (tiered retention): every count and rate is the same as with every row, and
// the header says how many launches were folded.
TEST(ReportModel, FoldedLaunchesCountAsTheCallsTheyWere) {
  std::string full = h100("resnet-clean");
  std::string folded_path = test::temp_path("report-resnet-clean-folded.db");
  std::filesystem::copy_file(full, folded_path);
  // Converted to schema 10 and folded, as `ingero compact --full-rows 1ns` does.
  ASSERT_TRUE(app::convert_trace(folded_path));
  auto folded = store::compact_trace(folded_path, 0, app::builtin_views());
  ASSERT_TRUE(folded) << folded.error().message;
  int64_t in_runs = test::query_int(folded_path, "SELECT sum(calls) FROM call_runs");
  ASSERT_GT(in_runs, 1000);
  json a = model_of(full), b = model_of(folded_path);
  EXPECT_EQ(a["header"]["folded_calls"], 0);
  EXPECT_EQ(b["header"]["folded_calls"], in_runs);
  for (const char* k : {"calls", "processes", "errors", "unfinished"})
    EXPECT_EQ(b["header"][k], a["header"][k]) << k;
  EXPECT_EQ(b["nodes"], a["nodes"]);
  EXPECT_EQ(b["processes"], a["processes"]);
  // Per op: the same calls in every rate bucket, and the same number in the histogram.
  ASSERT_EQ(b["ops"].size(), a["ops"].size());
  for (size_t i = 0; i < a["ops"].size(); ++i) {
    EXPECT_EQ(b["ops"][i]["op"], a["ops"][i]["op"]);
    EXPECT_EQ(b["ops"][i]["calls"], a["ops"][i]["calls"]) << a["ops"][i]["op"];
    EXPECT_EQ(sum(b["ops"][i]["hist"]["counts"]), b["ops"][i]["calls"].get<uint64_t>());
  }
  auto rated = [](const json& m) {
    uint64_t n = sum(m["rates"]["other_calls"]);
    for (const auto& s : m["rates"]["series"]) n += sum(s["calls"]);
    return n;
  };
  EXPECT_EQ(rated(b), rated(a));
  EXPECT_EQ(rated(b), b["header"]["calls"].get<uint64_t>());
  std::string notice;
  for (const auto& w : b["header"]["warnings"]) notice += w["text"].get<std::string>();
  EXPECT_NE(notice.find(std::to_string(in_runs) + " launches in this window were folded"),
            std::string::npos)
      << b["header"]["warnings"].dump();
}

// A window that starts inside a folded run counts the run's calls that start inside it, as
// the engine reads them (TraceSource::call_runs): the report's totals, its per-node and
// per-process tables and its rates are explain's calls, not the runs whose start is inside.
TEST(ReportModel, AWindowStartingInsideAFoldedRunCountsItsCallsInside) {
  std::string path = test::temp_path("report-resnet-clean-cut.db");
  std::filesystem::copy_file(h100("resnet-clean"), path);
  ASSERT_TRUE(app::convert_trace(path));
  auto folded = store::compact_trace(path, 0, app::builtin_views());
  ASSERT_TRUE(folded) << folded.error().message;
  // The middle of the longest run.
  int64_t start = test::query_int(path, "SELECT timestamp FROM call_runs ORDER BY calls DESC");
  int64_t span = test::query_int(path, "SELECT span_ns FROM call_runs ORDER BY calls DESC");
  ASSERT_GE(test::query_int(path, "SELECT max(calls) FROM call_runs"), 3);
  ReportOptions o;
  o.window.from_ns = start + span / 2;
  json m = model_of(path, o);
  // What the engine reads of that window, counted call by call.
  auto reader = store::TraceReader::open(path);
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  uint64_t calls = 0;
  std::map<uint32_t, uint64_t> per_pid;
  source.calls(o.window, [&](const hal::Event& e) {
    ++calls;
    ++per_pid[e.pid];
  });
  ASSERT_EQ(source.error(), "");
  // Rows and runs that start in the window are fewer: the cut run's later calls count too.
  const std::string from = std::to_string(o.window.from_ns);
  uint64_t starting_inside =
      uint64_t(test::query_int(path, "SELECT count(*) FROM calls WHERE ts_ns >= " + from)) +
      uint64_t(test::query_int(
          path, "SELECT coalesce(sum(calls), 0) FROM call_runs WHERE timestamp >= " + from));
  ASSERT_GT(calls, starting_inside);
  EXPECT_EQ(m["header"]["calls"], calls);
  uint64_t per_node = 0;
  for (const auto& n : m["nodes"]) per_node += n["calls"].get<uint64_t>();
  EXPECT_EQ(per_node, calls);
  std::map<uint32_t, uint64_t> report_pid;
  for (const auto& p : m["processes"])
    if (p.contains("calls")) report_pid[p["pid"].get<uint32_t>()] += p["calls"].get<uint64_t>();
  EXPECT_EQ(report_pid, per_pid);
  uint64_t rated = sum(m["rates"]["other_calls"]), hist = 0;
  for (const auto& s : m["rates"]["series"]) rated += sum(s["calls"]);
  for (const auto& op : m["ops"]) hist += sum(op["hist"]["counts"]);
  EXPECT_EQ(rated, calls);
  EXPECT_EQ(hist, calls);
}

// Issue 37.3: what retention deleted is said by the report, in explain's words (one wording,
// engine/loss_notes.h), and the report's window is explain's.
TEST(ReportModel, RetentionIsSaidAsExplainSaysIt) {
  std::string path = test::temp_path("report-retained.db");
  constexpr int64_t kOffset = 1'000'000'000'000;
  {
    auto w = store::TraceWriter::open(path, app::builtin_views());
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.mono_offset_ns = kOffset;
    ASSERT_TRUE((*w)->begin_session(si));
    (*w)->set_block_rows(1000);
    for (int i = 0; i < 20000; ++i)  // one call a ms for 20 s
      ASSERT_TRUE((*w)->add(test::runtime_call(uint64_t(i) * 1'000'000, 5000, 100, 100,
                                               hal::EventKind::kSync, "cudaStreamSynchronize")));
    ASSERT_TRUE((*w)->commit());
    store::RetentionPolicy keep{5'000'000'000, 0, {}};  // the last 5 s
    while (true) {
      auto pass = (*w)->apply_retention(keep, kOffset + 20'000'000'000);
      ASSERT_TRUE(pass) << pass.error().message;
      if (!pass->deleted) break;
    }
    store::SessionEnd end;
    end.exit_reason = "test";
    end.stopped_at_ns = kOffset + 20'000'000'000;
    ASSERT_TRUE((*w)->finish(end));
  }
  auto reader = store::TraceReader::open(path);
  ASSERT_TRUE(reader);
  store::SqlTraceSource source(**reader);
  auto a = engine::analyze(source, engine::Window{});
  ASSERT_TRUE(a.losses);
  // Blocks of 1,000 calls wholly older than 15 s: the first 15.
  EXPECT_EQ(a.losses->retention_calls, 15000u);
  auto notes = engine::loss_notes(*a.losses);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].text, "15,000 calls and 0 host events from " + engine::format_wall(kOffset) +
                               " to " + engine::format_wall(kOffset + 15'000'000'000) +
                               " were deleted by retention (--retain/--max-db-size): the trace "
                               "holds nothing of that time");
  json m = model_of(path);
  std::vector<std::string> said;
  for (const auto& w : m["header"]["warnings"]) said.push_back(w["text"]);
  EXPECT_NE(std::find(said.begin(), said.end(), notes[0].text), said.end()) << m["header"].dump();
  // The window is the engine's: the 5 s of calls kept.
  EXPECT_EQ(m["window"]["start_ns"].get<int64_t>(), a.span.first);
  EXPECT_EQ(m["window"]["end_ns"].get<int64_t>(), a.span.second);
  EXPECT_EQ(m["header"]["events"].get<uint64_t>(), a.events);
}

}  // namespace
}  // namespace ingero::serve::report
