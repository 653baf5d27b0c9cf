#include "engine/window_spec.h"

#include <cctype>
#include <cmath>
#include <ctime>

namespace ingero::engine {

double parse_duration_s(const std::string& text) {
  if (text.empty()) return -1;
  size_t pos = 0;
  double v;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    return -1;
  }
  std::string unit = text.substr(pos);
  double mult;
  if (unit.empty() || unit == "s")
    mult = 1;
  else if (unit == "ms")
    mult = 1e-3;
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

std::optional<int64_t> parse_time_ns(const std::string& s) {
  if (s.empty()) return std::nullopt;
  bool digits = s.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    if (s.size() > 19) return std::nullopt;
    int64_t v = std::stoll(s);
    return v < 100'000'000'000LL ? v * 1'000'000'000 : v;  // seconds or ns
  }
  std::tm tm{};
  const char* p = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!p) p = strptime(s.c_str(), "%Y-%m-%d %H:%M:%S", &tm);
  if (!p) return std::nullopt;
  int64_t ns = int64_t(timegm(&tm)) * 1'000'000'000;
  // A fraction of a second, then a zone (Z or an offset, as `date --iso-8601=ns` writes it);
  // anything else is refused, never ignored: a dropped offset moves the window by hours.
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (*p == '.') {
    ++p;
    int n = 0;
    int64_t scale = 100'000'000;
    for (; digit(*p); ++p, ++n, scale /= 10) {
      if (n == 9) return std::nullopt;  // finer than a nanosecond
      ns += (*p - '0') * scale;
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
    ns -= sign * (int64_t(hours) * 3600 + minutes * 60) * 1'000'000'000;
  }
  if (*p) return std::nullopt;
  return ns;
}

ingero::Result<Window> resolve_window(TraceSource& source, const WindowSpec& spec) {
  Window w;
  w.pid = spec.pid;
  auto span = source.time_span();
  if (!spec.since.empty()) {
    double s = parse_duration_s(spec.since);
    if (s <= 0) return ingero::make_error("bad --since '" + spec.since + "' (use 30s, 5m, 1h)");
    w.from_ns = span.second - int64_t(s * 1e9);
  }
  if (!spec.from.empty()) {
    auto t = parse_time_ns(spec.from);
    if (!t)
      return ingero::make_error("bad --from '" + spec.from +
                                "' (use 2026-04-03T12:18:02 or Unix seconds)");
    w.from_ns = *t;
  }
  if (!spec.to.empty()) {
    auto t = parse_time_ns(spec.to);
    if (!t) return ingero::make_error("bad --to '" + spec.to + "'");
    w.to_ns = *t;
  }
  if (w.from_ns > w.to_ns) return ingero::make_error("--from is after --to");
  return w;
}

}  // namespace ingero::engine
