#include "probe/load_failure.h"

#include <fstream>
#include <vector>

namespace ingero::hal {
namespace {

constexpr std::string_view kFailed = "': BPF program load failed:";
constexpr std::string_view kBegin = "-- BEGIN PROG LOAD LOG --";
constexpr std::string_view kEnd = "-- END PROG LOAD LOG --";

// The verifier's summary lines, which every log ends with, failed or not.
bool is_statistic(std::string_view line) {
  for (std::string_view s : {"processed ", "verification time", "stack depth", "Func#"})
    if (line.substr(0, s.size()) == s) return true;
  return false;
}

}  // namespace

std::optional<LoadFailure> load_failure_of(std::string_view out) {
  size_t at = out.rfind(kFailed);
  if (at == std::string_view::npos) return std::nullopt;
  size_t open = out.rfind("prog '", at);
  if (open == std::string_view::npos) return std::nullopt;
  LoadFailure f;
  f.program = std::string(out.substr(open + 6, at - open - 6));
  size_t begin = out.find(kBegin, at);
  if (begin == std::string_view::npos) return f;
  begin += kBegin.size();
  size_t end = out.find(kEnd, begin);
  std::string_view log = out.substr(begin, end == std::string_view::npos ? end : end - begin);
  std::string_view last;
  while (!log.empty()) {
    size_t nl = log.find('\n');
    std::string_view line = log.substr(0, nl);
    if (!line.empty() && !is_statistic(line)) last = line;
    if (nl == std::string_view::npos) break;
    log.remove_prefix(nl + 1);
  }
  f.reason = std::string(last);
  return f;
}

bool can_load_tracing(uint64_t cap_eff) {
  constexpr uint64_t kSysAdmin = 1ull << 21, kPerfmon = 1ull << 38, kBpf = 1ull << 39;
  return (cap_eff & kSysAdmin) || ((cap_eff & kPerfmon) && (cap_eff & kBpf));
}

std::optional<uint64_t> effective_caps() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("CapEff:", 0) == 0) {
      try {
        return std::stoull(line.substr(7), nullptr, 16);
      } catch (...) {
        return std::nullopt;
      }
    }
  return std::nullopt;
}

}  // namespace ingero::hal
