// Backend side channels without privileges: the test-only fakecounter backend's poller in
// `check`, the store and Prometheus; and files of schema 3-5, whose RDMA counters sit in an
// rdma_counters table, read and migrated into device_counters.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>

#include "app/builtin_backends.h"
#include "app/check_items.h"
#include "app/merge_traces.h"
#include "serve/metrics/metrics.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/backends/fakecounter/fakecounter_backend.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;

void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// ROOT/sys/class/fakecounter/fc0/ports/1: 250 words received, `crc` CRC errors, 1 reset.
std::string fake_tree(const std::string& name, int crc) {
  std::string root = temp_path(name);
  std::string port = root + "/sys/class/fakecounter/fc0/ports/1";
  put(port + "/link", "optical\n");
  put(port + "/state", "up\n");
  put(port + "/counters/rx_words", "250\n");
  put(port + "/counters/crc_errors", std::to_string(crc) + "\n");
  put(port + "/counters/resets", "1\n");
  return root;
}

TEST(FakeCounterBackend, CheckLineComesFromTheBackend) {
  hal::BackendRegistry reg;
  reg.add(make_fakecounter_backend());
  app::CheckReport rep;
  app::host_checks({fake_tree("fc-check", 3), reg.all()}, rep);
  const app::CheckItem* line = rep.find("fakecounter");
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->status, app::CheckStatus::kPass);
  EXPECT_EQ(line->value, "1 ports");
  EXPECT_EQ(line->detail, "3 counters readable");
  // The builtin backends' lines are not there: only the registry's backends speak.
  EXPECT_EQ(rep.find("infiniband"), nullptr);

  app::CheckReport none;
  app::host_checks({temp_path("fc-none"), reg.all()}, none);
  ASSERT_NE(none.find("fakecounter"), nullptr);
  EXPECT_EQ(none.find("fakecounter")->status, app::CheckStatus::kOptional);
  EXPECT_EQ(none.find("fakecounter")->value, "no devices");
}

TEST(FakeCounterBackend, PrometheusNamesAndLabelsComeFromTheBackendData) {
  auto b = make_fakecounter_backend();
  serve::Metrics m(false);
  EXPECT_TRUE(
      m.on_device_counters(0, b->name(), b->poll_counters(fake_tree("fc-prom-3", 3) + "/sys")));
  EXPECT_TRUE(
      m.on_device_counters(0, b->name(), b->poll_counters(fake_tree("fc-prom-8", 8) + "/sys")));
  std::string t = m.exposition();
  const std::string l =
      R"({fakecounter_device="fc0",fakecounter_link="optical",fakecounter_port="1"})";
  for (const auto& [series, value] :
       std::vector<std::pair<std::string, int>>{{"ingero_fakecounter_rx_words_bytes_total", 1000},
                                                {"ingero_fakecounter_crc_errors_total", 8},
                                                {"ingero_fakecounter_resets_total", 1}})
    EXPECT_NE(t.find(series + l + " " + std::to_string(value) + "\n"), std::string::npos)
        << series << "\n"
        << t;
  EXPECT_NE(t.find("# HELP ingero_fakecounter_crc_errors_total fake device counter crc_errors\n"),
            std::string::npos);
  EXPECT_EQ(t.find("fakecounter_state"), std::string::npos);  // not a metric label
}

TEST(FakeCounterBackend, StoredRowsAndTheBackendsView) {
  hal::BackendRegistry reg;
  reg.add(make_fakecounter_backend());
  std::string db = temp_path("fc.db");
  {
    auto w = store::TraceWriter::open(db, reg.views());
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->begin_session({}));
    auto ports = reg.find("fakecounter")->poll_counters(fake_tree("fc-store", 3) + "/sys");
    for (const auto& p : ports)
      for (const auto& c : p.counters)
        ASSERT_TRUE(
            (*w)->add_device_counter({1000, "fakecounter", p.device, c.counter, c.unit, p.port,
                                      c.value, c.value * c.factor, c.is_error, p.attributes}));
    ASSERT_TRUE((*w)->commit());
  }
  EXPECT_EQ(
      query_rows(db,
                 "SELECT backend, device, port, counter, value, base_value, unit, is_error, "
                 "json_extract(attributes, '$.link') FROM device_counters ORDER BY counter"),
      (Rows{{"fakecounter", "fc0", "1", "crc_errors", "3", "3", "events", "1", "optical"},
            {"fakecounter", "fc0", "1", "resets", "1", "1", "events", "0", "optical"},
            {"fakecounter", "fc0", "1", "rx_words", "250", "1000", "bytes", "0", "optical"}}));
  // The view the backend declared is in the file itself, for any SQLite client.
  EXPECT_EQ(query_rows(db, "SELECT type FROM sqlite_master WHERE name = 'fakecounter_errors'"),
            (Rows{{"view"}}));
  EXPECT_EQ(query_rows(db, "SELECT device, counter, value FROM fakecounter_errors"),
            (Rows{{"fc0", "crc_errors", "3"}}));
}

// A file as schema 5 wrote it: RDMA counters in their own table.
std::string schema5_file(const std::string& name) {
  std::string db = temp_path(name);
  { EXPECT_TRUE(store::TraceWriter::open(db)); }
  sqlite3* h = nullptr;
  sqlite3_open(db.c_str(), &h);
  const char* sql = R"SQL(
DROP TABLE device_counters;
CREATE TABLE rdma_counters (
  id INTEGER PRIMARY KEY, node TEXT NOT NULL DEFAULT '', session_id INTEGER NOT NULL DEFAULT 0,
  timestamp INTEGER NOT NULL, device TEXT NOT NULL, port INTEGER NOT NULL,
  transport TEXT NOT NULL, state TEXT NOT NULL DEFAULT '', rate TEXT NOT NULL DEFAULT '',
  counter TEXT NOT NULL, value INTEGER NOT NULL, base_value INTEGER NOT NULL, unit TEXT NOT NULL,
  is_error INTEGER NOT NULL DEFAULT 0);
INSERT INTO rdma_counters VALUES
  (1, 'n1', 1, 5000000000, 'mlx5_0', 1, 'InfiniBand', '4: ACTIVE', '200 Gb/sec', 'symbol_error',
   0, 0, 'events', 1),
  (2, 'n1', 1, 10000000000, 'mlx5_0', 1, 'InfiniBand', '4: ACTIVE', '200 Gb/sec', 'symbol_error',
   6, 6, 'events', 1),
  (3, 'n1', 1, 10000000000, 'mlx5_0', 1, 'InfiniBand', '4: ACTIVE', '200 Gb/sec',
   'port_xmit_data', 10, 40, 'bytes', 0);
PRAGMA user_version = 5;
)SQL";
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(h);
  return db;
}

const Rows kOldRows = {{"1", "n1", "mlx5_0", "1", "InfiniBand", "4: ACTIVE", "200 Gb/sec",
                        "symbol_error", "0", "0", "events", "1"},
                       {"2", "n1", "mlx5_0", "1", "InfiniBand", "4: ACTIVE", "200 Gb/sec",
                        "symbol_error", "6", "6", "events", "1"},
                       {"3", "n1", "mlx5_0", "1", "InfiniBand", "4: ACTIVE", "200 Gb/sec",
                        "port_xmit_data", "10", "40", "bytes", "0"}};
const char* kOldColumns =
    "SELECT id, node, device, port, transport, state, rate, counter, value, base_value, unit, "
    "is_error FROM rdma_counters ORDER BY id";

TEST(DeviceCounters, Schema5FileReadsThroughDeviceCountersWithoutChange) {
  std::string db = schema5_file("v5-read.db");
  EXPECT_EQ(query_rows(db, kOldColumns), kOldRows);
  EXPECT_EQ(query_rows(db,
                       "SELECT backend, counter, base_value, json_extract(attributes, "
                       "'$.rate') FROM device_counters WHERE id = 3"),
            (Rows{{"rdma", "port_xmit_data", "40", "200 Gb/sec"}}));
  auto r = store::TraceReader::open(db, app::builtin_views());
  ASSERT_TRUE(r) << r.error().message;
  store::SqlTraceSource src(**r);
  auto s = src.device_error_samples({});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[1].backend, "rdma");
  EXPECT_EQ(s[1].counter, "symbol_error");
  EXPECT_EQ(s[1].value, 6u);
  EXPECT_EQ(s[1].ts_ns, 10000000000);
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), 5);  // opened read-only: untouched
}

// Writing into it is refused (schema 10 keeps calls in blocks); `ingero compact` converts it.
TEST(DeviceCounters, Schema5FileConvertsItsRowsAndKeepsTheOldColumns) {
  std::string db = schema5_file("v5-migrate.db");
  ASSERT_FALSE(store::TraceWriter::open(db, app::builtin_views()));
  auto converted = app::convert_trace(db);
  ASSERT_TRUE(converted) << converted.error().message;
  EXPECT_EQ(query_int(db, "PRAGMA user_version"), store::kSchemaVersion);
  EXPECT_EQ(query_rows(db, "SELECT type FROM sqlite_master WHERE name = 'rdma_counters'"),
            (Rows{{"view"}}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM device_counters WHERE backend = 'rdma'"), 3);
  EXPECT_EQ(query_rows(db, kOldColumns), kOldRows);
  EXPECT_EQ(
      query_rows(db, "SELECT group_concat(name, ',') FROM pragma_table_info('rdma_counters')"),
      (Rows{{"id,node,session_id,timestamp,device,port,transport,state,rate,counter,value,"
             "base_value,unit,is_error"}}));
}

}  // namespace
}  // namespace ingero::test
