#include "app/result_printer.h"

#include <algorithm>
#include <cstdio>

#include "app/terminal_text.h"
#include "store/query_json.h"

namespace ingero::app {

using store::to_text;

namespace {

// A value as the table shows it: one line, at most 80 characters. A newline, tab or carriage
// return inside it is written as \n, \t, \r (they were spaces, which a value holding a real
// space could not be told from; --json keeps them).
std::string cell(const store::Value& v) {
  std::string s = one_line(to_text(v));
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace

// Two passes over the rows, the cells rendered in each: a copy of every cell as text, beside
// the values, doubled the memory of a large result (2 GB for 300,000 calls).
void print_table(std::ostream& out, const store::QueryResult& r) {
  std::vector<size_t> w(r.columns.size());
  std::vector<bool> numeric(r.columns.size(), true);
  for (size_t i = 0; i < r.columns.size(); ++i) w[i] = r.columns[i].size();
  for (const auto& row : r.rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (std::holds_alternative<std::string>(row[i])) numeric[i] = false;
      w[i] = std::max(w[i], cell(row[i]).size());
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
  for (const auto& row : r.rows) {
    for (size_t i = 0; i < row.size(); ++i)
      out << (i ? "  " : "") << pad(cell(row[i]), w[i], numeric[i]);
    out << "\n";
  }
  out << "(" << r.rows.size() << (r.rows.size() == 1 ? " row" : " rows");
  if (r.truncated) out << "; truncated at " << r.truncated_reason;
  out << ")\n";
}

}  // namespace ingero::app
