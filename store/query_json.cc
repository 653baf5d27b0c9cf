#include "store/query_json.h"

#include <cmath>
#include <cstdio>
#include <set>

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

std::vector<std::string> json_keys(const QueryResult& r) {
  std::vector<std::string> keys;
  std::set<std::string> taken(r.columns.begin(), r.columns.end());
  std::set<std::string> used;
  for (const std::string& c : r.columns) {
    std::string k = c;
    for (int n = 2; used.count(k); ++n) {
      k = c + "_" + std::to_string(n);
      if (taken.count(k)) k = c;  // a column of that name comes later: try the next number
    }
    used.insert(k);
    keys.push_back(k);
  }
  return keys;
}

nlohmann::ordered_json row_to_json(const QueryResult& r, size_t row,
                                   const std::vector<std::string>& keys) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (size_t i = 0; i < keys.size(); ++i) o[keys[i]] = to_json(r.rows[row][i]);
  return o;
}

nlohmann::ordered_json row_to_json(const QueryResult& r, size_t row) {
  return row_to_json(r, row, json_keys(r));
}

nlohmann::ordered_json to_json(const QueryResult& r) {
  const std::vector<std::string> keys = json_keys(r);
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) rows.push_back(row_to_json(r, i, keys));
  return rows;
}

}  // namespace ingero::store
