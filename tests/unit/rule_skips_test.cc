// Rules that look only at calls of some kinds (CUDA graphs, collectives) skip their pass over
// the calls where the window's statistics hold none of them (OpStatsSet::lacks): on a long
// trace each pass is seconds.
#include <gtest/gtest.h>

#include "app/builtin_backends.h"
#include "engine/analysis.h"
#include "engine/op_stats.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

// Counts the reads of calls it passes on.
class CountingSource final : public engine::TraceSource {
 public:
  explicit CountingSource(engine::TraceSource& s) : s_(s) {}
  int reads = 0;
  void calls(const engine::Window& w, const engine::EventFn& fn) override {
    ++reads;
    s_.calls(w, fn);
  }
  void call_runs(const engine::Window& w, const engine::EventFn& fn,
                 const engine::CallRunFn& run) override {
    ++reads;
    s_.call_runs(w, fn, run);
  }
  void host_events(const engine::Window& w, const engine::EventFn& fn) override {
    s_.host_events(w, fn);
  }
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override {
    return s_.snapshots(w);
  }
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override {
    return s_.process_activity(w);
  }
  std::map<uint32_t, engine::ProcessInfo> processes() override { return s_.processes(); }
  std::pair<int64_t, int64_t> time_span() override { return s_.time_span(); }
  uint64_t event_count(const engine::Window& w) override { return s_.event_count(w); }

 private:
  engine::TraceSource& s_;
};

TEST(RuleSkips, RulesOfKindsTheWindowLacksReadNoCall) {
  using K = hal::EventKind;
  std::string path = write_trace("skips.db", training_loop(50).calls);
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader) << reader.error().message;
  SqlTraceSource sql(**reader);
  CountingSource src(sql);
  engine::Analysis a;
  a.stats = engine::compute_op_stats(sql, a.window);
  ASSERT_FALSE(a.stats.overall.empty());
  EXPECT_TRUE(a.stats.lacks({K::kGraphLaunch, K::kCollective}));
  EXPECT_FALSE(a.stats.lacks({K::kGraphLaunch, K::kLaunch}));
  std::vector<engine::Chain> chains;
  engine::rule_graph_lifecycle(src, a, chains);
  engine::rule_collective_straggler(src, a, chains);
  EXPECT_EQ(src.reads, 0);
  EXPECT_TRUE(chains.empty());
  // Statistics not computed: nothing is known to be missing, and each rule reads the calls.
  a.stats = {};
  EXPECT_FALSE(a.stats.lacks({K::kGraphLaunch}));
  engine::rule_graph_lifecycle(src, a, chains);
  engine::rule_collective_straggler(src, a, chains);
  EXPECT_EQ(src.reads, 2);
  EXPECT_TRUE(chains.empty());
}

}  // namespace
}  // namespace ingero::store
