// Local ClickHouse servers for the fleet tests. Each runs from its own temporary directory
// (config, users, data, logs) on free ports, as user clickhouse when the test runs as root (the
// Debian package's service start is refused in containers), as the test's user otherwise. All
// servers of one set form the cluster kClusterName, one shard each, so a Distributed table on
// any of them spans them all.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace ingero::test {

class ClickHouseServers {
 public:
  static constexpr const char* kClusterName = "ingero_test";
  ClickHouseServers() = default;
  ClickHouseServers(const ClickHouseServers&) = delete;
  ~ClickHouseServers();

  // Starts `n` servers and waits until each answers; false (and why) otherwise.
  bool start(size_t n, std::string* why);
  // Stops server i (SIGTERM, then waits for the process to go); restart() brings it back on
  // the same ports and data.
  bool stop(size_t i);
  bool restart(size_t i, std::string* why);

  int http_port(size_t i) const { return servers_[i].http_port; }
  // http://127.0.0.1:PORT/DB (trace --clickhouse, ship) and clickhouse://... (--source).
  std::string url(size_t i, const std::string& db) const;
  std::string source(size_t i, const std::string& db) const;
  // Runs one statement; the answer's body. A non-200 answer fails the test and returns "".
  std::string query(size_t i, const std::string& sql) const;
  long long query_int(size_t i, const std::string& sql) const;

 private:
  struct Server {
    std::string dir;
    int http_port = 0, tcp_port = 0;
    pid_t pid = 0;
  };
  bool start_on_free_ports(size_t n, std::string* why);
  bool launch(Server& s, std::string* why);
  std::vector<Server> servers_;
};

// Where clickhouse-server is; "" when not installed.
std::string clickhouse_server_binary();

}  // namespace ingero::test

// Tests that need a ClickHouse server: skip loudly without one, fail under CI=true.
#define REQUIRE_CLICKHOUSE()                                                                  \
  do {                                                                                        \
    if (::ingero::test::clickhouse_server_binary().empty()) {                                 \
      if (::ingero::test::running_in_ci())                                                    \
        FAIL() << "CI=true but clickhouse-server is not installed (scripts/setup.sh "         \
                  "--with-tests installs it)";                                                \
      GTEST_SKIP() << "*** FLEET TEST SKIPPED (not CI): clickhouse-server not installed ***"; \
    }                                                                                         \
  } while (0)
