#include "app/result_printer.h"

#include <algorithm>
#include <cstdio>

#include "app/terminal_text.h"
#include "store/query_json.h"

namespace ingero::app {

using store::to_text;

namespace {

// The characters of UTF-8 text: its bytes that do not continue a character.
size_t chars(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

// A value as the table shows it: one line, at most kCellChars characters. A newline, tab or
// carriage return inside it is written as \n, \t, \r (they were spaces, which a value holding
// a real space could not be told from; --json keeps them). A longer value is cut on a
// character's boundary (a cut at byte 77 split a character and wrote half of it) and `cut` set.
std::string cell(const store::Value& v, bool* cut = nullptr) {
  std::string s = one_line(to_text(v));
  if (chars(s) <= kCellChars) return s;
  size_t n = 0, at = 0;
  for (; at < s.size(); ++at)
    if ((s[at] & 0xC0) != 0x80 && n++ == kCellChars - 3) break;
  if (cut) *cut = true;
  return s.substr(0, at) + "...";
}

}  // namespace

// Two passes over the rows, the cells rendered in each: a copy of every cell as text, beside
// the values, doubled the memory of a large result (2 GB for 300,000 calls).
// Widths are in characters: a column of names with accents was padded short by their bytes.
size_t print_table(std::ostream& out, const store::QueryResult& r) {
  std::vector<size_t> w(r.columns.size());
  std::vector<bool> numeric(r.columns.size(), true);
  size_t cut = 0;
  for (size_t i = 0; i < r.columns.size(); ++i) w[i] = chars(r.columns[i]);
  for (const auto& row : r.rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (std::holds_alternative<std::string>(row[i])) numeric[i] = false;
      bool was_cut = false;
      w[i] = std::max(w[i], chars(cell(row[i], &was_cut)));
      cut += was_cut;
    }
  auto pad = [&](const std::string& s, size_t width, bool right) {
    size_t n = chars(s);
    std::string p(width > n ? width - n : 0, ' ');
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
  return cut;
}

}  // namespace ingero::app
