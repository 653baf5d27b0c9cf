// Rules that look only at calls of some kinds (CUDA graphs, collectives) skip their pass over
// the calls where the window's statistics hold none of them (OpStatsSet::lacks): on a long
// trace each pass is seconds.
#include <gtest/gtest.h>

#include "app/builtin_backends.h"
#include "engine/analysis.h"
#include "engine/op_stats.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "tests/support/forwarding_source.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;

// Counts the reads of calls it passes on.
class CountingSource final : public test::ForwardingSource {
 public:
  using ForwardingSource::ForwardingSource;
  int reads = 0;
  void calls(const engine::Window& w, const engine::EventFn& fn) override {
    ++reads;
    inner().calls(w, fn);
  }
  void call_runs(const engine::Window& w, const engine::EventFn& fn,
                 const engine::CallRunFn& run) override {
    ++reads;
    inner().call_runs(w, fn, run);
  }
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
