#include "engine/window_spec.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <optional>
#include <tuple>

#include "engine/chain.h"

namespace ingero::engine {

double parse_duration_s(const std::string& text) {
  // Digits, an optional fraction, then the unit: std::stod also took " 5s", "+5s", "1e3s" and
  // "0x10s" (16 s), none of which a user writes meaning what it read.
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
  if (pos == 0) return -1;
  if (pos < text.size() && text[pos] == '.') {
    size_t frac = ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == frac) return -1;
  }
  double v;
  try {
    v = std::stod(text.substr(0, pos));
  } catch (...) {  // out of range
    return -1;
  }
  std::string unit = text.substr(pos);
  double mult;
  if (unit.empty()) return -1;  // 5 what? (cli.md: every duration is written with its unit)
  if (unit == "s")
    mult = 1;
  else if (unit == "ms")
    mult = 1e-3;
  else if (unit == "us")  // as the MCP tools' schema allows
    mult = 1e-6;
  else if (unit == "ns")
    mult = 1e-9;
  else if (unit == "m")
    mult = 60;
  else if (unit == "h")
    mult = 3600;
  else if (unit == "d")
    mult = 86400;
  else
    return -1;
  if (v < 0 || !std::isfinite(v)) return -1;
  return v * mult;
}

namespace {

constexpr int64_t kNsPerS = 1'000'000'000;

// Whether `t` (as strptime read it) names a real instant: strptime takes the 30th of February
// and a 61st second, which timegm then rolls into the next month or minute.
bool real_date(const std::tm& t, time_t secs) {
  std::tm back{};
  if (!gmtime_r(&secs, &back)) return false;
  return back.tm_year == t.tm_year && back.tm_mon == t.tm_mon && back.tm_mday == t.tm_mday &&
         back.tm_hour == t.tm_hour && back.tm_min == t.tm_min && back.tm_sec == t.tm_sec;
}

// Unix seconds as `date +%s.%N` writes them: a sign for a time before 1970 and a fraction of up
// to nine digits; nullopt when `s` is not of that form or the clock cannot hold it.
std::optional<int64_t> parse_unix_seconds(const std::string& s) {
  size_t at = s[0] == '-' ? 1 : 0;
  size_t dot = s.find('.', at);
  std::string whole = s.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
  std::string frac = dot == std::string::npos ? "" : s.substr(dot + 1);
  auto all_digits = [](const std::string& t) {
    return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!all_digits(whole) || (dot != std::string::npos && !all_digits(frac)) || frac.size() > 9 ||
      whole.size() > 19)
    return std::nullopt;
  uint64_t secs = std::stoull(whole);  // 19 digits fit in 64 bits
  if (secs > uint64_t(INT64_MAX / kNsPerS)) return std::nullopt;
  frac.resize(9, '0');
  int64_t ns = int64_t(secs) * kNsPerS;
  if (__builtin_add_overflow(ns, int64_t(std::stoll(frac)), &ns)) return std::nullopt;
  return at ? -ns : ns;
}

}  // namespace

// Times are Unix ns in an int64_t: from 1677-09-21 to 2262-04-11. Anything outside is refused,
// never wrapped around (a --to in 2300 read as 1730 was "after --from").
std::optional<int64_t> parse_time_ns(const std::string& s) {
  if (s.empty()) return std::nullopt;
  bool digits = s.find_first_not_of("0123456789") == std::string::npos;
  // Eleven digits or more, unsigned and without a fraction: Unix ns (seconds that large are
  // past 5138).
  if (digits && s.size() <= 19 && std::stoull(s) >= 100'000'000'000ULL) {
    uint64_t v = std::stoull(s);
    return v <= uint64_t(INT64_MAX) ? std::optional<int64_t>(int64_t(v)) : std::nullopt;
  }
  if (s.find_first_not_of("-.0123456789") == std::string::npos) return parse_unix_seconds(s);
  std::tm tm{};
  const char* p = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!p) p = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!p) return std::nullopt;
  std::tm parsed = tm;
  time_t secs = timegm(&tm);
  if (!real_date(parsed, secs)) return std::nullopt;
  int64_t ns = 0;
  if (__builtin_mul_overflow(int64_t(secs), kNsPerS, &ns)) return std::nullopt;
  // A fraction of a second, then a zone (Z or an offset, as `date --iso-8601=ns` writes it);
  // anything else is refused, never ignored: a dropped offset moves the window by hours.
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (*p == '.') {
    ++p;
    int n = 0;
    int64_t scale = 100'000'000;
    for (; digit(*p); ++p, ++n, scale /= 10) {
      if (n == 9) return std::nullopt;  // finer than a nanosecond
      if (__builtin_add_overflow(ns, (*p - '0') * scale, &ns)) return std::nullopt;
    }
    if (n == 0) return std::nullopt;
  }
  if (*p == 'Z' || *p == 'z') {
    ++p;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1;
    auto two = [&](int& v) {
      if (!digit(p[0]) || !digit(p[1])) return false;
      v = (p[0] - '0') * 10 + (p[1] - '0');
      p += 2;
      return true;
    };
    int hours = 0, minutes = 0;
    if (!two(hours)) return std::nullopt;
    if (*p == ':') ++p;
    if (*p && !two(minutes)) return std::nullopt;
    if (hours > 23 || minutes > 59) return std::nullopt;
    if (__builtin_sub_overflow(ns, sign * (int64_t(hours) * 3600 + minutes * 60) * kNsPerS, &ns))
      return std::nullopt;
  }
  if (*p) return std::nullopt;
  return ns;
}

ingero::Status check_window_spec(const WindowSpec& spec) {
  // --since counts back from the trace's end: with --from it was dropped without a word, and
  // with --to it made a window that ended before it began.
  if (!spec.since.empty() && (!spec.from.empty() || !spec.to.empty()))
    return ingero::make_error("--since cannot be combined with --from or --to");
  if (!spec.since.empty() && parse_duration_s(spec.since) * 1e9 < 1)
    return ingero::make_error("bad --since '" + spec.since + "' (use 30s, 5m, 1h)");
  // As every duration flag (cli.md): past a century it is no window anyone means.
  constexpr double kCenturyS = 100 * 365.25 * 86400;
  if (!spec.since.empty() && parse_duration_s(spec.since) > kCenturyS)
    return ingero::make_error("bad --since '" + spec.since + "': longer than a century");
  std::optional<int64_t> from, to;
  for (auto [flag, text, t] : {std::tuple{"--from", &spec.from, &from}, {"--to", &spec.to, &to}}) {
    if (text->empty()) continue;
    *t = parse_time_ns(*text);
    if (!*t)
      return ingero::make_error(std::string("bad ") + flag + " '" + *text +
                                "' (use 2026-04-03T12:18:02 or Unix seconds, a real date "
                                "between 1677 and 2262)");
  }
  if (from && to && *from > *to) return ingero::make_error("--from is after --to");
  return {};
}

ingero::Result<Window> resolve_window(TraceSource& source, const WindowSpec& spec) {
  if (auto st = check_window_spec(spec); !st) return st.error();
  Window w;
  w.pid = spec.pid;
  if (!spec.since.empty()) {
    auto span = source.time_span();
    // Longer than the clock can count back: the whole trace.
    double back = parse_duration_s(spec.since) * 1e9;
    w.from_ns =
        back >= double(span.second) - double(INT64_MIN) ? INT64_MIN : span.second - int64_t(back);
  }
  if (!spec.from.empty()) w.from_ns = *parse_time_ns(spec.from);
  if (!spec.to.empty()) w.to_ns = *parse_time_ns(spec.to);
  return w;
}

namespace {

std::string miss_of(std::pair<int64_t, int64_t> span, const Window& w, const std::string& what) {
  if (span.first > span.second || (span.first == 0 && span.second == 0)) return "";
  if (w.to_ns >= span.first && w.from_ns <= span.second) return "";
  return "the window holds no event of " + what + ", which runs from " + format_wall(span.first) +
         " to " + format_wall(span.second);
}

}  // namespace

std::string window_miss(TraceSource& source, const Window& w, const std::string& path) {
  return miss_of(source.time_span(), w, path);
}

std::string node_window_miss(TraceSource& source, const Window& w, const std::string& node) {
  return miss_of(source.node_span(node), w, "node " + node);
}

}  // namespace ingero::engine
