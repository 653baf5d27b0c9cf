// Reads of calls bounded by the blocks' entries (store/event_rows.h, store/archive_scan.h): no
// block begins more than the widest block's span before a call it holds, so a window lists the
// blocks from there, and the calls of overlapping blocks come in time order.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "app/builtin_backends.h"
#include "store/event_rows.h"
#include "store/schema.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::test {
namespace {

using hal::EventKind;
using store::tiers_fixture::call;
using store::tiers_fixture::host_event;
using store::tiers_fixture::launch;

constexpr int64_t kBase = 1'700'000'000'000'000'000;

std::vector<std::string> read_calls(const std::string& path, const store::EventFilter& f) {
  std::vector<std::string> out;
  auto r = store::TraceReader::open(path, app::builtin_views());
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return out;
  store::StringPool strings;
  auto st =
      store::for_each_event((*r)->db(), store::EventCursor::Rows::kCalls, f, strings,
                            [&](const hal::Event& e) -> ingero::Status {
                              out.push_back(std::to_string(int64_t(e.ts_ns) - kBase) + "/" +
                                            std::string(e.op) + "/" + std::to_string(e.dur_ns));
                              return {};
                            });
  EXPECT_TRUE(st) << st.error().message;
  return out;
}

store::EventFilter window(int64_t from, int64_t to) {
  store::EventFilter f;
  f.from_ns = kBase + from;
  f.to_ns = kBase + to;
  return f;
}

TEST(ArchiveBounds, CallsAmongHostEventsAndAWideBlockReadInTimeOrderByWindow) {
  // 600 launches 1 us apart, a host event after each; a sync that began at 5.5 us ends at
  // 400.5 us, and is written then (a call is written when it ends): in blocks of 7 calls, the
  // block that takes it spans ~399 us where the others span ~7 us.
  std::string path = temp_path("blocks.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    (*w)->set_block_rows(7);
    store::SessionInfo si;
    si.mono_offset_ns = kBase;
    ASSERT_TRUE((*w)->begin_session(si));
    for (uint64_t i = 0; i < 600; ++i) {
      ASSERT_TRUE((*w)->add(launch(i * 1000, 100)));
      ASSERT_TRUE((*w)->add(host_event(i * 1000 + 300, "sched_wakeup", EventKind::kSchedWakeup)));
      if (i == 400) {
        ASSERT_TRUE((*w)->add(call(5500, 395'000, "cuda_runtime", "cudaDeviceSynchronize",
                                   EventKind::kSync, 10, 10)));
      }
    }
    ASSERT_TRUE((*w)->finish(store::SessionEnd{}));
  }
  // 601 calls in 86 blocks (the last of 6), every host event a row.
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store"), 86);
  EXPECT_EQ(query_int(path, "SELECT sum(calls) FROM call_store"), 601);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM host_rows"), 600);
  // Launches 399 and 400, the sync, launches 401-404.
  EXPECT_EQ(query_int(path, "SELECT max(last_ts - first_ts) FROM call_store"), 404'000 - 5'500);
  EXPECT_EQ(query_int(path, "SELECT count(*) FROM call_store WHERE last_ts - first_ts > 7000"), 1);

  auto all = read_calls(path, {});
  ASSERT_EQ(all.size(), 601u);
  EXPECT_EQ(all[5], "5000/cudaLaunchKernel/100");
  EXPECT_EQ(all[6], "5500/cudaDeviceSynchronize/395000");  // in time order, not written order
  EXPECT_EQ(all[7], "6000/cudaLaunchKernel/100");
  // Every call in time order: the merge goes from block to block as the wide block's rows and
  // the next blocks' interleave, not only at a block's end.
  std::vector<int64_t> starts;
  for (const std::string& c : all) starts.push_back(std::stoll(c));
  EXPECT_TRUE(std::is_sorted(starts.begin(), starts.end()));
  EXPECT_EQ(std::adjacent_find(starts.begin(), starts.end()), starts.end());
  // The wide block's later calls, in a window that begins long after the block does.
  EXPECT_EQ(
      read_calls(path, window(398'500, 402'500)),
      (std::vector<std::string>{"399000/cudaLaunchKernel/100", "400000/cudaLaunchKernel/100",
                                "401000/cudaLaunchKernel/100", "402000/cudaLaunchKernel/100"}));
  // Its first call, and the last block's.
  EXPECT_EQ(read_calls(path, window(5'200, 5'800)),
            (std::vector<std::string>{"5500/cudaDeviceSynchronize/395000"}));
  EXPECT_EQ(read_calls(path, window(592'500, 700'000)).size(), 7u);
}

}  // namespace
}  // namespace ingero::test
