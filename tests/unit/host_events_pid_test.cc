// A window that names a process counts that process's host events alone (engine/host_context.cc):
// `explain --pid 2254`, a DataLoader worker that never switched, printed "sched_switch 3,676",
// its parent's, under a header naming pid 2254. The others are still read: who preempted it.
#include <gtest/gtest.h>

#include "engine/analysis.h"
#include "store/sql_trace_source.h"
#include "test_paths.h"

namespace ingero::engine {
namespace {

std::map<std::string, uint64_t> host_ops(std::optional<uint32_t> pid) {
  auto r =
      store::TraceReader::open(INGERO_FIXTURES_DIR "/ingero-go/pytorch-dataloader-starvation.db");
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  if (!r) return {};
  store::SqlTraceSource src(**r);
  Window w;
  w.pid = pid;
  Analysis a = analyze(src, w);
  EXPECT_EQ(src.error(), "");
  std::map<std::string, uint64_t> out;
  for (const auto& [name, st] : a.host.ops) out[name] = st.count;
  return out;
}

TEST(HostEventsOfAPid, AWindowsProcessCountsItsOwnHostEventsOnly) {
  auto all = host_ops(std::nullopt);
  EXPECT_EQ(all.at("sched_switch"), 3676u);
  auto parent = host_ops(2233);
  EXPECT_EQ(parent.at("sched_switch"), 3676u);  // every switch of the file is the parent's
  // The worker's own: the fork that made it.
  EXPECT_EQ(host_ops(2254), (std::map<std::string, uint64_t>{{"process_fork", 1}}));
}

}  // namespace
}  // namespace ingero::engine
