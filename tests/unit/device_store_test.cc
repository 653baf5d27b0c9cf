// The device side channel in the trace file: device_samples and device_events written in
// batches (an absent figure is NULL), read back by SqlTraceSource for the engine (the window's
// pid restricting per-process rows only), added to a file that predates them, and absent
// without error from a file without them.
#include <gtest/gtest.h>

#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;

hal::DeviceSample whole(int64_t ts) {
  hal::DeviceSample s;
  s.ts_ns = ts;
  s.period_ns = 100'000'000;
  s.source = "nvml";
  s.device = 1;
  s.uuid = "GPU-1";
  s.sm_util = 9;
  s.mem_used = 1000;
  s.temperature_c = -3;
  return s;
}

hal::DeviceSample of(int64_t ts, uint32_t pid) {
  hal::DeviceSample s = whole(ts);
  s.pid = pid;
  s.temperature_c.reset();
  s.mem_used.reset();
  s.sm_util = 4.5;
  return s;
}

void write(const std::string& db) {
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_TRUE((*w)->begin_session({}));
  ASSERT_TRUE((*w)->add_device_samples({whole(1'000), of(1'000, 7), of(1'000, 8), whole(2'000)}));
  ASSERT_TRUE((*w)->add_device_events(
      {{1'500, "nvml", 1, "GPU-1", "xid", 79, "Xid 79 (GPU has fallen off the bus)"}}));
  ASSERT_TRUE((*w)->commit());
}

TEST(DeviceStore, RowsWithAbsentFiguresAsNull) {
  std::string db = temp_path("dev.db");
  write(db);
  EXPECT_EQ(query_rows(db,
                       "SELECT timestamp, period_ns, source, device, uuid, pid, sm_util, mem_util, "
                       "mem_used, temperature_c, power_mw FROM device_samples ORDER BY id"),
            (Rows{{"1000", "100000000", "nvml", "1", "GPU-1", "NULL", "9.000000", "NULL", "1000",
                   "-3", "NULL"},
                  {"1000", "100000000", "nvml", "1", "GPU-1", "7", "4.500000", "NULL", "NULL",
                   "NULL", "NULL"},
                  {"1000", "100000000", "nvml", "1", "GPU-1", "8", "4.500000", "NULL", "NULL",
                   "NULL", "NULL"},
                  {"2000", "100000000", "nvml", "1", "GPU-1", "NULL", "9.000000", "NULL", "1000",
                   "-3", "NULL"}}));
  EXPECT_EQ(query_rows(db, "SELECT timestamp, kind, code, detail FROM device_events"),
            (Rows{{"1500", "xid", "79", "Xid 79 (GPU has fallen off the bus)"}}));
}

TEST(DeviceStore, TheSourceReadsThemWithTheWindowsPid) {
  std::string db = temp_path("dev.db");
  write(db);
  auto r = store::TraceReader::open(db);
  ASSERT_TRUE(r) << r.error().message;
  store::SqlTraceSource src(**r);
  engine::Window w;
  w.pid = 7;
  std::vector<hal::DeviceSample> got;
  src.device_samples(w, [&](const hal::DeviceSample& s) { got.push_back(s); });
  ASSERT_EQ(got.size(), 3u);  // the two whole-device rows and pid 7's
  size_t mine = 0;
  for (const auto& s : got) {
    if (s.pid) {
      ++mine;
      EXPECT_EQ(*s.pid, 7u);
      EXPECT_EQ(s.sm_util, 4.5);
      EXPECT_FALSE(s.mem_used);
    } else {
      EXPECT_EQ(s.temperature_c, -3);
      EXPECT_EQ(s.mem_used, 1000u);
      EXPECT_FALSE(s.power_mw);
    }
  }
  EXPECT_EQ(mine, 1u);
  w.from_ns = 1'600;
  got.clear();
  src.device_samples(w, [&](const hal::DeviceSample& s) { got.push_back(s); });
  EXPECT_EQ(got.size(), 1u);
  auto ev = src.device_events(engine::Window{});
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].code, 79);
  EXPECT_EQ(ev[0].uuid, "GPU-1");
  EXPECT_EQ(src.error(), "");
}

// A file without device rows has no device tables (a host without GPUs, or a file written
// before them): readers find no device data and no error; the first device row adds them.
TEST(DeviceStore, FilesGainTheTablesWithTheirFirstDeviceRow) {
  std::string db = temp_path("old.db");
  {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->add_device_samples({}));
    ASSERT_TRUE((*w)->commit());
  }
  EXPECT_EQ(query_int(db,
                      "SELECT count(*) FROM sqlite_master WHERE name LIKE 'device_s%' OR "
                      "name LIKE 'device_e%'"),
            0);
  {
    auto r = store::TraceReader::open(db);
    ASSERT_TRUE(r) << r.error().message;
    store::SqlTraceSource src(**r);
    size_t n = 0;
    src.device_samples(engine::Window{}, [&](const hal::DeviceSample&) { ++n; });
    EXPECT_EQ(n, 0u);
    EXPECT_TRUE(src.device_events(engine::Window{}).empty());
    EXPECT_EQ(src.error(), "");
  }
  write(db);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM device_samples"), 4);
}

}  // namespace
}  // namespace ingero::test
