#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "engine/chain.h"

namespace ingero::engine {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kHigh:
      return "HIGH";
    case Severity::kMedium:
      return "MEDIUM";
    case Severity::kLow:
      return "LOW";
  }
  return "LOW";
}

const char* stack_counts_name(StackCounts c) {
  switch (c) {
    case StackCounts::kSlowestCalls:
      return "slowest_calls";
    case StackCounts::kSiteCalls:
      return "site_calls";
    case StackCounts::kGaps:
      return "gaps";
    case StackCounts::kPreempted:
      return "preempted";
    case StackCounts::kNone:
      return "none";
    case StackCounts::kFirstFailure:
      return "first_failure";
  }
  return "none";
}

std::string stack_counts_text(const ChainStack& s) {
  std::string worst = s.worst_ns ? format_duration(s.worst_ns) : "";
  switch (s.counts) {
    case StackCounts::kSlowestCalls:
      if (!s.examined) return "";
      return format_count(s.calls) + " of the " + format_count(s.examined) + " slowest calls" +
             (worst.empty() ? "" : ", worst " + worst);
    case StackCounts::kSiteCalls:
      if (!s.calls) return "";
      return (s.calls == s.examined || !s.examined
                  ? format_count(s.calls) + " calls"
                  : format_count(s.calls) + " of " + format_count(s.examined) + " calls") +
             (worst.empty() ? "" : ", worst " + worst);
    case StackCounts::kGaps:
      if (!s.calls) return "";
      return format_count(s.calls) + (s.calls == 1 ? " gap" : " gaps") + " in " +
             format_count(s.examined) + " steady steps" +
             (worst.empty() ? "" : ", longest " + worst);
    case StackCounts::kPreempted:
      if (!s.worst_ns) return "";
      return worst + " preempted just before this call in " + format_count(s.examined) +
             " steady steps";
    case StackCounts::kNone:
      return "";
    case StackCounts::kFirstFailure:
      return "the first failing call";
  }
  return "";
}

std::string format_duration(uint64_t ns) {
  char buf[32];
  if (ns < 1000)
    std::snprintf(buf, sizeof(buf), "%lluns", (unsigned long long)ns);
  else if (ns < 1000000)
    std::snprintf(buf, sizeof(buf), "%.0fus", double(ns) / 1e3);
  else if (ns < 1000000000)
    std::snprintf(buf, sizeof(buf), ns < 100000000 ? "%.1fms" : "%.0fms", double(ns) / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.1fs", double(ns) / 1e9);
  return buf;
}

std::string format_bytes(uint64_t b) {
  const char* u[] = {"B", "KB", "MB", "GB", "TB"};
  double v = double(b);
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), i ? "%.1f %s" : "%.0f %s", v, u[i]);
  return buf;
}

std::string shell_word(std::string_view s) {
  auto plain = [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_.,:/@%+=-", c) != nullptr;
  };
  if (!s.empty() && std::all_of(s.begin(), s.end(), [&](char c) { return c && plain(c); }))
    return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string format_count(uint64_t n) {
  std::string digits = std::to_string(n), out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string pct(double share) {
  char b[16];
  std::snprintf(b, sizeof(b), "%.0f%%", share * 100);
  return b;
}

std::string pct_at_least(double share) {
  char b[16];
  // The 1e-9 keeps a share that is a whole percent in binary's way (0.29 * 100 = 28.999...).
  std::snprintf(b, sizeof(b), "%.0f%%", std::floor(share * 100 + 1e-9));
  return b;
}

std::string format_wall(int64_t ns) {
  time_t t = time_t(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace ingero::engine
