#include "tests/support/clickhouse_server.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/http_client.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

bool alive(pid_t pid) { return pid > 0 && kill(pid, 0) == 0; }

std::string config_xml(const std::string& dir, int http, int tcp,
                       const std::vector<int>& cluster_tcp) {
  std::string shards;
  for (int p : cluster_tcp)
    shards += "      <shard><replica><host>127.0.0.1</host><port>" + std::to_string(p) +
              "</port></replica></shard>\n";
  return "<?xml version=\"1.0\"?>\n<yandex>\n"
         "  <logger><level>warning</level><log>" +
         dir + "/log/server.log</log><errorlog>" + dir +
         "/log/error.log</errorlog><size>10M</size><count>1</count></logger>\n"
         "  <http_port>" +
         std::to_string(http) +
         "</http_port>\n"
         "  <tcp_port>" +
         std::to_string(tcp) +
         "</tcp_port>\n"
         "  <listen_host>127.0.0.1</listen_host>\n"
         "  <path>" +
         dir + "/data/</path>\n  <tmp_path>" + dir +
         "/tmp/</tmp_path>\n"
         "  <user_files_path>" +
         dir +
         "/user_files/</user_files_path>\n"
         "  <format_schema_path>" +
         dir +
         "/format_schemas/</format_schema_path>\n"
         "  <users_config>" +
         dir +
         "/users.xml</users_config>\n"
         "  <default_profile>default</default_profile>\n"
         "  <default_database>default</default_database>\n"
         "  <mark_cache_size>67108864</mark_cache_size>\n"
         "  <uncompressed_cache_size>67108864</uncompressed_cache_size>\n"
         "  <max_concurrent_queries>50</max_concurrent_queries>\n"
         "  <remote_servers>\n    <" +
         std::string(ClickHouseServers::kClusterName) + ">\n" + shards + "    </" +
         ClickHouseServers::kClusterName + ">\n  </remote_servers>\n</yandex>\n";
}

constexpr const char* kUsersXml = R"(<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default>
    <readonly1><readonly>1</readonly></readonly1><readonly2><readonly>2</readonly></readonly2>
  </profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default>
    <reader1><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>readonly1</profile><quota>default</quota></reader1>
    <reader2><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>readonly2</profile><quota>default</quota></reader2></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
)";

}  // namespace

std::string clickhouse_server_binary() {
  for (const char* p : {"/usr/bin/clickhouse-server", "/usr/sbin/clickhouse-server"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

ClickHouseServers::~ClickHouseServers() {
  for (size_t i = 0; i < servers_.size(); ++i) stop(i);
}

std::string ClickHouseServers::url(size_t i, const std::string& db) const {
  return "http://127.0.0.1:" + std::to_string(servers_[i].http_port) + "/" + db;
}

std::string ClickHouseServers::source(size_t i, const std::string& db) const {
  return "clickhouse://127.0.0.1:" + std::to_string(servers_[i].http_port) + "/" + db;
}

std::string ClickHouseServers::query(size_t i, const std::string& sql) const {
  auto r = http_request("127.0.0.1", servers_[i].http_port, "POST", "/", sql, {},
                        std::chrono::seconds(60));
  if (r.status != 200) {
    ADD_FAILURE() << "ClickHouse :" << servers_[i].http_port << " " << sql << ": " << r.status
                  << " " << r.error << r.body;
    return "";
  }
  return r.body;
}

long long ClickHouseServers::query_int(size_t i, const std::string& sql) const {
  std::string s = query(i, sql);
  return s.empty() ? -1 : std::stoll(s);
}

bool ClickHouseServers::launch(Server& s, std::string* why) {
  std::string pidfile = s.dir + "/server.pid";
  std::filesystem::remove(pidfile);  // the server refuses to start over an existing one
  std::string cmd = clickhouse_server_binary() + " --config-file=" + s.dir +
                    "/config.xml --daemon --pid-file=" + pidfile;
  std::vector<std::string> argv = {"/bin/sh", "-c", cmd};
  if (geteuid() == 0) argv = {"su", "-s", "/bin/sh", "clickhouse", "-c", cmd};
  std::string out, err;
  if (run_command(argv, &out, &err, {}, std::chrono::seconds(30)) != 0) {
    *why = "clickhouse-server did not start: " + err.substr(0, 2000);
    return false;
  }
  for (int i = 0; i < 600; ++i) {
    if (!s.pid) {
      std::ifstream in(pidfile);
      in >> s.pid;
    }
    auto r = http_get("127.0.0.1", s.http_port, "/ping");
    if (r.status == 200 && s.pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::ifstream log(s.dir + "/log/error.log");
  std::string tail((std::istreambuf_iterator<char>(log)), {});
  *why = "clickhouse-server on :" + std::to_string(s.http_port) +
         " did not answer in 60 s: " + tail.substr(tail.size() > 2000 ? tail.size() - 2000 : 0);
  return false;
}

bool ClickHouseServers::start(size_t n, std::string* why) {
  if (clickhouse_server_binary().empty()) {
    *why = "clickhouse-server is not installed";
    return false;
  }
  // A port found free can be taken by a test running beside this one before the server binds
  // it (CI: "Address already in use" on its TCP port, the set never up): new ports, again.
  for (int attempt = 0;; ++attempt) {
    if (start_on_free_ports(n, why)) return true;
    for (size_t i = 0; i < servers_.size(); ++i) stop(i);
    if (attempt == 2 || why->find("Address already in use") == std::string::npos) return false;
    servers_.clear();
  }
}

bool ClickHouseServers::start_on_free_ports(size_t n, std::string* why) {
  servers_.resize(n);
  std::vector<int> tcp;
  for (auto& s : servers_) {
    s.http_port = free_tcp_port();
    do s.tcp_port = free_tcp_port();
    while (s.tcp_port == s.http_port);
    tcp.push_back(s.tcp_port);
  }
  passwd* ch = getpwnam("clickhouse");
  for (size_t i = 0; i < n; ++i) {
    Server& s = servers_[i];
    s.dir = temp_path("clickhouse-" + std::to_string(i));
    for (const char* d : {"", "/log", "/data", "/tmp", "/user_files", "/format_schemas"})
      std::filesystem::create_directories(s.dir + d);
    std::ofstream(s.dir + "/config.xml") << config_xml(s.dir, s.http_port, s.tcp_port, tcp);
    std::ofstream(s.dir + "/users.xml") << kUsersXml;
    if (geteuid() == 0) {
      if (!ch) {
        *why = "running as root, but there is no user clickhouse to run the server as";
        return false;
      }
      // The server's user needs its directory and the way to it.
      for (auto p = std::filesystem::path(s.dir); p != p.root_path(); p = p.parent_path())
        if (p.string().rfind("/tmp/ingero-tests", 0) == 0) chmod(p.c_str(), 0755);
      for (const auto& e : std::filesystem::recursive_directory_iterator(s.dir))
        (void)!chown(e.path().c_str(), ch->pw_uid, ch->pw_gid);
      (void)!chown(s.dir.c_str(), ch->pw_uid, ch->pw_gid);
    }
    if (!launch(s, why)) return false;
  }
  return true;
}

bool ClickHouseServers::stop(size_t i) {
  Server& s = servers_[i];
  if (!alive(s.pid)) return true;
  kill(s.pid, SIGTERM);
  for (int k = 0; k < 300 && alive(s.pid); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (alive(s.pid)) kill(s.pid, SIGKILL);
  for (int k = 0; k < 50 && alive(s.pid); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  s.pid = 0;
  return true;
}

bool ClickHouseServers::restart(size_t i, std::string* why) {
  stop(i);
  return launch(servers_[i], why);
}

}  // namespace ingero::test
