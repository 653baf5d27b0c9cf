#include "probe/bpf_errors.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ingero::hal {
namespace {

constexpr std::string_view kFailed = "': BPF program load failed:";
constexpr std::string_view kBegin = "-- BEGIN PROG LOAD LOG --";
constexpr std::string_view kEnd = "-- END PROG LOAD LOG --";

// libbpf's warnings while this thread loads an object (a LoadWarnings), else null.
thread_local std::string* g_load_warnings = nullptr;

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

std::optional<uint64_t> effective_caps(const std::string& status) {
  std::ifstream in(status);
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

bool in_user_namespace(const std::string& uid_map) {
  std::ifstream in(uid_map);
  uint64_t inside = 0, outside = 0, count = 0;
  // The host's maps every uid to itself: "0 0 4294967295". No file: no user namespaces.
  if (!(in >> inside >> outside >> count)) return false;
  return !(inside == 0 && outside == 0 && count == 4294967295ULL);
}

bool may_load_bpf() {
  auto caps = effective_caps();
  return caps && can_load_tracing(*caps) && !in_user_namespace();
}

LoadWarnings::LoadWarnings() : outer_(g_load_warnings) { g_load_warnings = &text_; }

LoadWarnings::~LoadWarnings() { g_load_warnings = outer_; }

int libbpf_print(enum libbpf_print_level level, const char* fmt, va_list args) {
  bool debug = getenv("INGERO_LIBBPF_DEBUG") != nullptr;
  if (level == LIBBPF_WARN && g_load_warnings) {
    va_list copy;
    va_copy(copy, args);
    char small[512];
    int n = vsnprintf(small, sizeof(small), fmt, copy);
    va_end(copy);
    std::string msg;
    if (n >= int(sizeof(small))) {
      msg.resize(size_t(n) + 1);
      va_copy(copy, args);
      vsnprintf(msg.data(), msg.size(), fmt, copy);
      va_end(copy);
      msg.pop_back();
    } else if (n > 0) {
      msg.assign(small, size_t(n));
    }
    // A failed program's verifier log can run to megabytes: its head (where libbpf names the
    // program) and its tail (where the verifier says why) are kept.
    constexpr size_t kKeepHead = 1024, kKeepTail = 64 * 1024;
    if (msg.size() > kKeepHead + kKeepTail)
      msg = msg.substr(0, kKeepHead) + "\n" + msg.substr(msg.size() - kKeepTail);
    *g_load_warnings += msg;
  }
  if (!debug && (level == LIBBPF_WARN || level == LIBBPF_DEBUG)) return 0;
  return vfprintf(stderr, fmt, args);
}

Error bpf_error(const std::string& what, int err) {
  if (err < 0) err = -err;
  std::string hint;
  if (err == EPERM || err == EACCES)
    hint = " (tracing needs root, or CAP_BPF and CAP_PERFMON; run `ingero check`)";
  return Error{what + ": " + std::strerror(err) + hint, err};
}

Error load_error(int err, const std::string& warnings) {
  if (err < 0) err = -err;
  auto f = load_failure_of(warnings);
  if (!f || (!may_load_bpf() && (err == EPERM || err == EACCES)))
    return bpf_error("loading the BPF programs", err);
  std::string why = f->reason.empty() ? "before verifying it" : "its verifier said: " + f->reason;
  return Error{"loading the BPF programs: the kernel refused program " + f->program + ", " + why +
                   " (" + std::strerror(err) + ")",
               err};
}

}  // namespace ingero::hal
