#include "app/result_printer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ingero::app {

std::string to_text(const store::Value& v) {
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

nlohmann::json to_json(const store::Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return nullptr;
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) return *d;
  // Traced strings may hold anything; invalid UTF-8 is replaced, not fatal.
  const auto& s = std::get<std::string>(v);
  return nlohmann::json(s);
}

nlohmann::json to_json(const store::QueryResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json o = nlohmann::json::object();
    for (size_t i = 0; i < r.columns.size(); ++i) o[r.columns[i]] = to_json(row[i]);
    rows.push_back(std::move(o));
  }
  return rows;
}

void print_table(std::ostream& out, const store::QueryResult& r) {
  std::vector<size_t> w(r.columns.size());
  std::vector<std::vector<std::string>> cells;
  std::vector<bool> numeric(r.columns.size(), true);
  for (size_t i = 0; i < r.columns.size(); ++i) w[i] = r.columns[i].size();
  for (const auto& row : r.rows) {
    std::vector<std::string> c;
    for (size_t i = 0; i < row.size(); ++i) {
      std::string s = to_text(row[i]);
      for (auto& ch : s)
        if (ch == '\n' || ch == '\t' || ch == '\r') ch = ' ';
      if (std::holds_alternative<std::string>(row[i])) numeric[i] = false;
      w[i] = std::max(w[i], std::min<size_t>(s.size(), 80));
      if (s.size() > 80) s = s.substr(0, 77) + "...";
      c.push_back(std::move(s));
    }
    cells.push_back(std::move(c));
  }
  auto pad = [&](const std::string& s, size_t width, bool right) {
    std::string p(width > s.size() ? width - s.size() : 0, ' ');
    return right ? p + s : s + p;
  };
  for (size_t i = 0; i < r.columns.size(); ++i)
    out << (i ? "  " : "") << pad(r.columns[i], w[i], false);
  out << "\n";
  for (size_t i = 0; i < r.columns.size(); ++i) out << (i ? "  " : "") << std::string(w[i], '-');
  out << "\n";
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) out << (i ? "  " : "") << pad(row[i], w[i], numeric[i]);
    out << "\n";
  }
  out << "(" << r.rows.size() << (r.rows.size() == 1 ? " row" : " rows");
  if (r.truncated) out << "; truncated at " << r.truncated_reason;
  out << ")\n";
}

}  // namespace ingero::app
