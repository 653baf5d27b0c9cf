// Reads of archived calls bounded by the archive's entries (store/event_rows.h,
// store/archive_scan.h): no call row is left below the blocks' last id, so the rows read
// beside the blocks start above it; and no block begins more than the widest block's span
// before a call it holds, so a window lists the blocks from there.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/builtin_backends.h"
#include "store/call_archive.h"
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

TEST(ArchiveBounds, CallsAmongHostEventsAndAWideBlockReadAsFromTheRows) {
  // 600 launches 1 us apart, a host event after each; a sync that began at 5.5 us ends at
  // 400.5 us, and is written then (a call is written when it ends): the block that takes it
  // spans ~395 us where the others span ~7 us.
  std::string rows = temp_path("rows.db");
  {
    auto w = store::TraceWriter::open(rows);
    ASSERT_TRUE(w) << w.error().message;
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
    ASSERT_TRUE((*w)->end_session(store::SessionEnd{}));
  }
  std::string archived = temp_path("archived.db");
  std::filesystem::copy_file(rows, archived);
  {
    auto db = store::Db::open(archived, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    ASSERT_TRUE(store::migrate(**db));
    // Whole blocks of 7 only: 595 of the 601 calls; the last 6 stay rows, above the host
    // events below the blocks' last id.
    auto a = store::archive_calls(**db, {.block_rows = 7, .whole_blocks = true});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->rows, 595u);
  }
  std::string calls_in_rows =
      "SELECT count(*) FROM main.events WHERE source IN (SELECT id FROM sources WHERE vendor <> "
      "'host') AND id ";
  std::string last_id = "(SELECT max(last_id) FROM call_blocks)";
  EXPECT_EQ(query_int(archived, calls_in_rows + "<= " + last_id), 0);
  EXPECT_EQ(query_int(archived, calls_in_rows + "> " + last_id), 6);
  // The host events of launches 0-592.
  EXPECT_EQ(query_int(archived, "SELECT count(*) FROM main.events WHERE id < " + last_id), 593);
  // Launches 399 and 400, the sync, launches 401-404.
  EXPECT_EQ(query_int(archived, "SELECT max(last_ts - first_ts) FROM call_blocks"),
            404'000 - 5'500);
  EXPECT_EQ(query_int(archived, "SELECT count(*) FROM call_blocks WHERE last_ts - first_ts > 7000"),
            1);

  auto all = read_calls(rows, {});
  ASSERT_EQ(all.size(), 601u);
  EXPECT_EQ(read_calls(archived, {}), all);
  // The wide block's later calls, in a window that begins long after the block does.
  auto late = read_calls(rows, window(398'500, 402'500));
  EXPECT_EQ(late, (std::vector<std::string>{
                      "399000/cudaLaunchKernel/100", "400000/cudaLaunchKernel/100",
                      "401000/cudaLaunchKernel/100", "402000/cudaLaunchKernel/100"}));
  EXPECT_EQ(read_calls(archived, window(398'500, 402'500)), late);
  // Its first call, and the rows left after the blocks.
  auto early = read_calls(rows, window(5'200, 5'800));
  EXPECT_EQ(early, (std::vector<std::string>{"5500/cudaDeviceSynchronize/395000"}));
  EXPECT_EQ(read_calls(archived, window(5'200, 5'800)), early);
  auto tail = read_calls(rows, window(592'500, 700'000));
  EXPECT_EQ(tail.size(), 7u);
  EXPECT_EQ(read_calls(archived, window(592'500, 700'000)), tail);
}

}  // namespace
}  // namespace ingero::test
