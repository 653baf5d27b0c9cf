// A backend with a counter poller and nothing else (tests/backends/fakecounter, one folder and
// one ingero_add_backend line), traced for real: its counters reach the trace file, its view,
// the Prometheus endpoint and the check report through hal::VendorBackend alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "app/check_items.h"
#include "app/tracer.h"
#include "tests/backends/fakecounter/fakecounter_backend.h"
#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using Rows = std::vector<std::vector<std::string>>;

TEST(FakeCounterBackend, TraceStoresItsCountersAndServesThemToPrometheus) {
  REQUIRE_BPF();
  std::string sys = temp_path("fc-sys");
  std::string port = sys + "/class/fakecounter/fc0/ports/1";
  std::filesystem::create_directories(port + "/counters");
  std::ofstream(port + "/link") << "optical\n";
  std::ofstream(port + "/state") << "up\n";
  std::ofstream(port + "/counters/rx_words") << "250\n";
  std::ofstream(port + "/counters/crc_errors") << "3\n";
  std::ofstream(port + "/counters/resets") << "1\n";

  hal::BackendRegistry registry;
  registry.add(make_fakecounter_backend());
  int metrics_port = free_tcp_port();
  std::string stop = temp_path("fc-stop");
  app::TraceOptions o;
  o.db_path = temp_path("fc-trace.db");
  o.sysfs_root = sys;
  o.prometheus = "127.0.0.1:" + std::to_string(metrics_port);
  o.command = {"/bin/sh", "-c", "while [ ! -e " + stop + " ]; do sleep 0.05; done"};
  o.quiet = true;
  o.live = false;
  int rc = -1;
  std::thread tracer([&] { rc = app::run_trace(o, registry); });

  // The first poll happens as the trace starts; the series are there from then on.
  const std::string l =
      R"({fakecounter_device="fc0",fakecounter_link="optical",fakecounter_port="1"})";
  std::string body;
  for (int i = 0; i < 300 && body.find("ingero_fakecounter_resets_total") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    body = http_get("127.0.0.1", metrics_port, "/metrics").body;
  }
  std::ofstream(stop) << "";
  tracer.join();
  ASSERT_EQ(rc, 0);
  for (const std::string& line : {"ingero_fakecounter_rx_words_bytes_total" + l + " 1000\n",
                                  "ingero_fakecounter_crc_errors_total" + l + " 3\n",
                                  "ingero_fakecounter_resets_total" + l + " 1\n"})
    EXPECT_NE(body.find(line), std::string::npos) << line << body;

  // One row per counter and poll (at the start, every 5 s, at the end), all alike.
  EXPECT_EQ(query_rows(o.db_path,
                       "SELECT backend, device, port, counter, value, base_value, unit, is_error, "
                       "attributes FROM device_counters GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 "
                       "ORDER BY counter"),
            (Rows{{"fakecounter", "fc0", "1", "crc_errors", "3", "3", "events", "1",
                   R"({"link":"optical","state":"up"})"},
                  {"fakecounter", "fc0", "1", "resets", "1", "1", "events", "0",
                   R"({"link":"optical","state":"up"})"},
                  {"fakecounter", "fc0", "1", "rx_words", "250", "1000", "bytes", "0",
                   R"({"link":"optical","state":"up"})"}}));
  int64_t rows = query_int(o.db_path, "SELECT count(*) FROM device_counters");
  EXPECT_GE(rows, 6);
  EXPECT_EQ(rows % 3, 0);
  // The backend's view, written into the file from the registry the trace ran with.
  EXPECT_EQ(query_rows(o.db_path, "SELECT DISTINCT device, counter, value FROM fakecounter_errors"),
            (Rows{{"fc0", "crc_errors", "3"}}));
  // No RDMA backend in this registry: no rdma_counters view in the file.
  EXPECT_EQ(query_int(o.db_path, "SELECT count(*) FROM sqlite_master WHERE name = 'rdma_counters'"),
            0);

  // `check` with this registry: the backend's own line (this host has no fake devices).
  auto rep = app::run_checks(registry, registry.all());
  const app::CheckItem* line = rep.find("fakecounter");
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->value, "no devices");
  EXPECT_EQ(line->status, app::CheckStatus::kOptional);
}

}  // namespace
}  // namespace ingero::test
