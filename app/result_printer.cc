#include "app/result_printer.h"

#include <algorithm>
#include <cstdio>

#include "store/query_json.h"

namespace ingero::app {

using store::to_text;

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
