#include "kernelside/system_snapshot.h"

#include <fstream>
#include <sstream>

namespace ingero::kernelside {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

bool parse_proc_stat_cpu(const std::string& text, uint64_t* busy, uint64_t* total,
                         int64_t* running) {
  std::istringstream in(text);
  std::string line;
  bool ok = false;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "cpu") {
      uint64_t v[10] = {};
      for (auto& x : v) ls >> x;
      // user nice system idle iowait irq softirq steal guest guest_nice
      uint64_t idle = v[3] + v[4];
      uint64_t sum = 0;
      for (int i = 0; i < 8; ++i) sum += v[i];  // guest time is already in user/nice
      *total = sum;
      *busy = sum - idle;
      ok = true;
    } else if (key == "procs_running" && running) {
      ls >> *running;
    }
  }
  return ok;
}

void parse_meminfo(const std::string& text, SystemSnapshot* s) {
  std::istringstream in(text);
  std::string key;
  int64_t v;
  std::string unit;
  int64_t total = 0, avail = 0, swap_total = 0, swap_free = 0;
  while (in >> key >> v) {
    std::getline(in, unit);
    if (key == "MemTotal:")
      total = v;
    else if (key == "MemAvailable:")
      avail = v;
    else if (key == "SwapTotal:")
      swap_total = v;
    else if (key == "SwapFree:")
      swap_free = v;
  }
  s->mem_avail_mb = avail / 1024;
  s->mem_pct = total ? 100.0 * double(total - avail) / double(total) : 0;
  s->swap_mb = (swap_total - swap_free) / 1024;
}

SystemSnapshot SnapshotSampler::sample(int64_t wall_ns) {
  SystemSnapshot s;
  s.ts_ns = wall_ns;
  uint64_t busy = 0, total = 0;
  if (parse_proc_stat_cpu(slurp(proc_ + "/stat"), &busy, &total, &s.procs_running)) {
    uint64_t db = busy - last_busy_, dt = total - last_total_;
    s.cpu_pct = dt ? 100.0 * double(db) / double(dt) : 0;
    last_busy_ = busy;
    last_total_ = total;
  }
  parse_meminfo(slurp(proc_ + "/meminfo"), &s);
  std::istringstream la(slurp(proc_ + "/loadavg"));
  la >> s.load_avg;
  return s;
}

}  // namespace ingero::kernelside
