// ClickHouse's TabSeparated format: the escaping of values we insert, and a streaming parser
// for the rows we read back (TSV and TSVWithNames responses arrive in arbitrary chunks).
//
// Escapes written: backslash, tab, newline, carriage return, NUL, backspace and form feed
// (\\ \t \n \r \0 \b \f). Everything else, including invalid UTF-8, passes through as bytes
// (ClickHouse Strings are bytes). NULL in a Nullable column is \N; a string holding the two
// characters "\N" is written "\\N" and so never reads back as NULL.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::fleet {

void append_tsv_escaped(std::string& out, std::string_view value);
inline constexpr std::string_view kTsvNull = "\\N";

// One parsed field: the unescaped text, or NULL.
struct TsvField {
  std::string text;
  bool null = false;
};

// Splits one line (without its newline) into unescaped fields. False when an escape is
// malformed (a lone backslash at the end).
bool parse_tsv_line(std::string_view line, std::vector<TsvField>& fields);

// Feeds response chunks, calls `on_row` for every complete line. The memory held is one
// partial line. on_row returns false to stop (the parser then ignores further input).
class TsvStream {
 public:
  using RowFn = std::function<bool(const std::vector<TsvField>&)>;
  TsvStream(size_t columns, RowFn on_row) : columns_(columns), on_row_(std::move(on_row)) {}
  // False once stopped by on_row or on a malformed row (error() says which).
  bool feed(std::string_view chunk);
  // The input ended: a last line without a newline is a malformed (truncated) row.
  bool finish();
  bool stopped() const { return stopped_; }
  const std::string& error() const { return error_; }
  size_t rows() const { return rows_; }

 private:
  bool line(std::string_view l);
  size_t columns_;
  RowFn on_row_;
  std::string partial_;
  std::vector<TsvField> fields_;
  std::string error_;
  size_t rows_ = 0;
  bool stopped_ = false;
};

}  // namespace ingero::fleet
