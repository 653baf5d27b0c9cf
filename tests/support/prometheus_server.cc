#include "tests/support/prometheus_server.h"

#include <signal.h>

#include <filesystem>
#include <fstream>

#include "tests/support/http_client.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

bool PrometheusServer::start(int target_port, std::string* why) {
  return start_with("  - job_name: ingero\n    static_configs:\n      - targets: ['127.0.0.1:" +
                        std::to_string(target_port) + "']\n",
                    why);
}

bool PrometheusServer::start_with(const std::string& scrape_configs, std::string* why) {
  std::string dir = temp_path("prometheus");
  std::filesystem::create_directories(dir + "/data");
  std::ofstream(dir + "/prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
      << scrape_configs;
  // A port found free can be taken by a test running beside this one before the server binds
  // it (it then exits at once): a new port, again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = free_tcp_port();
    proc_ = Subprocess::spawn({kPrometheusBinary, "--config.file=" + dir + "/prometheus.yml",
                               "--storage.tsdb.path=" + dir + "/data",
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_)});
    bool exited = false;
    for (int i = 0; i < 300 && !exited; ++i) {
      if (http_get("127.0.0.1", port_, "/-/ready").status == 200) return true;
      exited = proc_.wait(std::chrono::milliseconds(100)) != -1;
    }
    if (!exited) {
      proc_.signal(SIGTERM);
      proc_.wait(std::chrono::seconds(10));
    }
    *why = "prometheus did not become ready: " + proc_.err().substr(0, 2000);
    if (!exited || why->find("address already in use") == std::string::npos) return false;
  }
  return false;
}

PrometheusServer::~PrometheusServer() {
  if (proc_.ok()) {
    proc_.signal(SIGTERM);
    proc_.wait(std::chrono::seconds(20));
  }
}

std::vector<std::pair<PrometheusServer::Json, double>> PrometheusServer::query(
    const std::string& promql) {
  auto r = http_get("127.0.0.1", port_, "/api/v1/query?query=" + url_encode(promql));
  std::vector<std::pair<Json, double>> v;
  if (r.status != 200) return v;
  auto j = Json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j["status"] != "success") return v;
  for (const auto& s : j["data"]["result"])
    v.emplace_back(s["metric"], std::stod(s["value"][1].get<std::string>()));
  return v;
}

}  // namespace ingero::test
