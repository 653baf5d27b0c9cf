// Helpers of the fleet tests: trace files with known rows, a ClickHouse client that loses
// answers on purpose, and row counts on both sides.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fleet/clickhouse_client.h"
#include "hal/event.h"
#include "tests/support/clickhouse_server.h"

namespace ingero::test {

// 2026-03-31 23:59:59 UTC: a session that crosses midnight.
constexpr int64_t kBeforeMidnight = 1775001599LL * 1'000'000'000;
constexpr int64_t kMs = 1'000'000;

// A trace of `n` launches of node-f on one thread, 10 us apart, an hour before
// kBeforeMidnight, most of them foldable (tiered retention folds those under 0.99 x the op's
// p95). `shape`, where given, changes launch i before it is written.
void write_launches(const std::string& path, int n,
                    const std::function<void(hal::Event&, int)>& shape = {});

// A trace file session with `events` calls of node `node`, starting at `start_wall_ns` and
// one every `step_ns`; every third call carries stack 77 (two frames, a quote and a tab in
// the function name), three processes, two snapshots, one cgroup, one chain, then finish().
void write_session(const std::string& path, const std::string& node, int64_t start_wall_ns,
                   int events, int64_t step_ns);

// Inserts pass through to ClickHouse except the ones numbered (from 1) in `lose_answer`
// (stored, then reported as a lost answer: kAmbiguous), `refuse` (not sent: kUnreachable) and
// `drop` (not sent, yet answered with success: a proxy that says 200 and stores nothing).
class FlakyClient : public fleet::ClickHouseClient {
 public:
  using fleet::ClickHouseClient::ClickHouseClient;
  std::set<int> lose_answer, refuse, drop;
  int inserts = 0;
  std::vector<std::pair<std::string, size_t>> stored;  // (table, rows) of each stored insert
  ingero::Status insert(const std::string& table, const std::string& columns, std::string_view body,
                        size_t rows, std::string_view format) override;
};

// Per table: rows of the trace file; the rows ClickHouse holds for them (versioned tables,
// sessions and process_names, count one per key); and rows ClickHouse holds twice (the same
// row, or the same version of a row).
struct Counts {
  long long file = 0, rows = 0, duplicates = 0;
};
// `node`: only that node's rows in ClickHouse (several files shipped to one database).
std::vector<std::pair<std::string, Counts>> compare_counts(const ClickHouseServers& ch, size_t i,
                                                           const std::string& db,
                                                           const std::string& file,
                                                           const std::string& node = "");

// Starts `n` ClickHouse servers as `ch`, or skips (fails under CI) without clickhouse-server.
#define START_SERVERS(ch, n)                 \
  REQUIRE_CLICKHOUSE();                      \
  ClickHouseServers ch;                      \
  do {                                       \
    std::string why_;                        \
    ASSERT_TRUE(ch.start(n, &why_)) << why_; \
  } while (0)

// Database `db` of server `i` of `ch` as a shipper's endpoint.
fleet::Endpoint endpoint(const ClickHouseServers& ch, size_t i, const std::string& db);

// Every shipped table of `file` (of `node`, or all) is in `db` of server `i`, row for row,
// with no row twice.
void expect_exact(const ClickHouseServers& ch, size_t i, const std::string& db,
                  const std::string& file, const std::string& node = "");

}  // namespace ingero::test
