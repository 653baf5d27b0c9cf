#include "store/query_json.h"

#include <cmath>
#include <cstdio>

namespace ingero::store {

std::string to_text(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "NULL";
  if (auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&v)) {
    char buf[64];
    if (std::fabs(*d) >= 1e15 || (std::fabs(*d) < 1e-4 && *d != 0))
      std::snprintf(buf, sizeof(buf), "%.6g", *d);
    else
      std::snprintf(buf, sizeof(buf), "%.6f", *d);
    std::string s = buf;
    if (s.find('.') != std::string::npos && s.find('e') == std::string::npos) {
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
    return s;
  }
  return std::get<std::string>(v);
}

nlohmann::json to_json(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return nullptr;
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) {
    // JSON has no infinity or NaN, and null would read as SQL NULL: the names, as strings
    // (ClickHouse's quoted spelling).
    if (std::isnan(*d)) return "nan";
    if (std::isinf(*d)) return *d > 0 ? "inf" : "-inf";
    return *d;
  }
  // Traced strings may hold anything; invalid UTF-8 is replaced, not fatal.
  const auto& s = std::get<std::string>(v);
  return nlohmann::json(s);
}

nlohmann::json row_to_json(const QueryResult& r, size_t row) {
  nlohmann::json o = nlohmann::json::object();
  for (size_t i = 0; i < r.columns.size(); ++i) o[r.columns[i]] = to_json(r.rows[row][i]);
  return o;
}

nlohmann::json to_json(const QueryResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) rows.push_back(row_to_json(r, i));
  return rows;
}

}  // namespace ingero::store
