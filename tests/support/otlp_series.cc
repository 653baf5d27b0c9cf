#include "tests/support/otlp_series.h"

#include <charconv>
#include <cstdio>
#include <sstream>

namespace ingero::test {
namespace {

namespace pm = opentelemetry::proto::metrics::v1;

std::string number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

double as_printed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.16g", v);
  return std::stod(buf);
}

std::string key(const std::string& name, const std::map<std::string, std::string>& labels) {
  std::string k = name;
  char sep = '{';
  for (const auto& [n, v] : labels) {
    k += sep + n + "=\"" + v + "\"";
    sep = ',';
  }
  return labels.empty() ? k : k + "}";
}

template <class KV>
std::map<std::string, std::string> attrs(const KV& kv) {
  std::map<std::string, std::string> m;
  for (const auto& a : kv) m[a.key()] = a.value().string_value();
  return m;
}

}  // namespace

std::map<std::string, double> exposition_series(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    size_t brace = line.find('{'), space = line.rfind(' ');
    std::string name = line.substr(0, std::min(brace, space));
    std::map<std::string, std::string> labels;
    if (brace != std::string::npos) {
      std::string body = line.substr(brace + 1, line.rfind('}') - brace - 1);
      size_t pos = 0;
      while (pos < body.size()) {
        size_t eq = body.find('=', pos), q2 = body.find('"', eq + 2);
        std::string n = body.substr(pos, eq - pos), v = body.substr(eq + 2, q2 - eq - 2);
        if (n == "le" && v != "+Inf") v = number(std::stod(v));
        labels[n] = v;
        pos = q2 + 2;
      }
    }
    out[key(name, labels)] = std::stod(line.substr(space + 1));
  }
  return out;
}

std::map<std::string, double> otlp_series(const pm::ScopeMetrics& sm) {
  std::map<std::string, double> out;
  for (const auto& m : sm.metrics()) {
    if (m.has_sum())
      for (const auto& p : m.sum().data_points())
        out[key(m.name(), attrs(p.attributes()))] = as_printed(p.as_double());
    if (m.has_gauge())
      for (const auto& p : m.gauge().data_points())
        out[key(m.name(), attrs(p.attributes()))] = as_printed(p.as_double());
    if (m.has_histogram())
      for (const auto& p : m.histogram().data_points()) {
        auto l = attrs(p.attributes());
        uint64_t cum = 0;
        for (int i = 0; i < p.bucket_counts_size(); ++i) {
          cum += p.bucket_counts(i);
          auto lb = l;
          lb["le"] =
              i < p.explicit_bounds_size() ? number(as_printed(p.explicit_bounds(i))) : "+Inf";
          out[key(m.name() + "_bucket", lb)] = double(cum);
        }
        out[key(m.name() + "_sum", l)] = as_printed(p.sum());
        out[key(m.name() + "_count", l)] = double(p.count());
      }
  }
  return out;
}

std::string series_diff(const std::map<std::string, double>& got,
                        const std::map<std::string, double>& want) {
  std::string d;
  for (const auto& [k, v] : want) {
    auto it = got.find(k);
    if (it == got.end())
      d += "missing " + k + " " + number(v) + "\n";
    else if (it->second != v)
      d += "differs " + k + " " + number(it->second) + " != " + number(v) + "\n";
  }
  for (const auto& [k, v] : got)
    if (!want.count(k)) d += "extra " + k + " " + number(v) + "\n";
  return d;
}

std::map<std::string, double> with_prefix(const std::map<std::string, double>& s,
                                          const std::string& prefix) {
  std::map<std::string, double> out;
  for (const auto& [k, v] : s)
    if (k.rfind(prefix, 0) == 0) out[k] = v;
  return out;
}

}  // namespace ingero::test
