#include "engine/device_busy.h"

#include <algorithm>

namespace ingero::engine {

std::string source_label(const std::string& source) { return source == "nvml" ? "NVML" : source; }

void DeviceBusy::add(const hal::DeviceSample& s) {
  std::string key = s.source + ":" + std::to_string(s.device);
  if (!devices_.count(key))
    devices_[key] = "GPU " + std::to_string(s.device) + (s.uuid.empty() ? "" : " (" + s.uuid + ")");
  if (s.pid) used_[*s.pid].insert(key);
  if (!s.sm_util || s.period_ns <= 0) return;
  series_[{s.pid ? uint64_t(*s.pid) : kDevice, key}].push_back(
      {s.ts_ns - s.period_ns, s.ts_ns, float(std::clamp(*s.sm_util, 0.0, 100.0))});
}

void DeviceBusy::done() {
  for (auto& [k, v] : series_)
    std::sort(v.begin(), v.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
}

std::pair<int64_t, double> DeviceBusy::cover(const Series& s, int64_t a, int64_t b) {
  // Spans of one series follow each other (each covers the time since the one before), so the
  // first that may overlap [a, b) is among the last few starting before a.
  auto it =
      std::lower_bound(s.begin(), s.end(), a, [](const Span& x, int64_t t) { return x.start < t; });
  for (int back = 0; back < 4 && it != s.begin(); ++back) --it;
  int64_t covered = 0, reach = a;
  double weighted = 0;
  for (; it != s.end() && it->start < b; ++it) {
    int64_t lo = std::max({it->start, a, reach}), hi = std::min(it->end, b);
    if (hi <= lo) continue;
    covered += hi - lo;
    weighted += double(hi - lo) * it->util / 100.0;
    reach = hi;
  }
  return {covered, weighted};
}

std::vector<std::string> DeviceBusy::devices_of(uint32_t pid) const {
  if (auto it = used_.find(pid); it != used_.end()) return {it->second.begin(), it->second.end()};
  if (devices_.size() == 1) return {devices_.begin()->first};
  return {};
}

std::string DeviceBusy::device_name(const std::string& key) const {
  auto it = devices_.find(key);
  return it == devices_.end() ? key : it->second;
}

std::optional<DeviceBusy::Measure> DeviceBusy::measure(uint32_t pid, int64_t a, int64_t b) const {
  if (b <= a || devices_.empty()) return std::nullopt;
  int64_t need = (b - a + 1) / 2;
  // The mean over the process's devices that samples cover (a rank on two GPUs is as busy as
  // their average).
  auto over = [&](uint64_t who, bool per_process) -> std::optional<Measure> {
    double sum = 0;
    size_t n = 0;
    std::string source;
    for (const std::string& key : devices_of(pid)) {
      auto it = series_.find({who, key});
      if (it == series_.end()) continue;
      auto [covered, weighted] = cover(it->second, a, b);
      if (covered < need) continue;
      sum += weighted / double(covered);
      ++n;
      if (source.empty()) source = key.substr(0, key.find(':'));
    }
    if (!n) return std::nullopt;
    return Measure{sum / double(n), per_process, source};
  };
  if (auto m = over(pid, true)) return m;
  return over(kDevice, false);
}

}  // namespace ingero::engine
