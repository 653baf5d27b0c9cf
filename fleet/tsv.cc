#include "fleet/tsv.h"

namespace ingero::fleet {

void append_tsv_escaped(std::string& out, std::string_view value) {
  size_t start = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    char esc;
    switch (value[i]) {
      case '\\':
        esc = '\\';
        break;
      case '\t':
        esc = 't';
        break;
      case '\n':
        esc = 'n';
        break;
      case '\r':
        esc = 'r';
        break;
      case '\0':
        esc = '0';
        break;
      case '\b':
        esc = 'b';
        break;
      case '\f':
        esc = 'f';
        break;
      default:
        continue;
    }
    out.append(value.substr(start, i - start));
    out += '\\';
    out += esc;
    start = i + 1;
  }
  out.append(value.substr(start));
}

bool parse_tsv_line(std::string_view line, std::vector<TsvField>& fields) {
  fields.clear();
  fields.emplace_back();
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\t') {
      fields.emplace_back();
      continue;
    }
    TsvField& f = fields.back();
    if (c != '\\') {
      f.text += c;
      continue;
    }
    if (++i == line.size()) return false;
    switch (line[i]) {
      case 't':
        f.text += '\t';
        break;
      case 'n':
        f.text += '\n';
        break;
      case 'r':
        f.text += '\r';
        break;
      case '0':
        f.text += '\0';
        break;
      case 'b':
        f.text += '\b';
        break;
      case 'f':
        f.text += '\f';
        break;
      case 'a':
        f.text += '\a';
        break;
      case 'v':
        f.text += '\v';
        break;
      case 'N':
        // \N alone is NULL; inside a longer value it would be an unknown escape.
        if (!f.text.empty() || (i + 1 < line.size() && line[i + 1] != '\t')) return false;
        f.null = true;
        break;
      default:
        f.text += line[i];
        break;  // \\ \' and any other escaped character
    }
  }
  return true;
}

bool TsvStream::line(std::string_view l) {
  if (!parse_tsv_line(l, fields_) || fields_.size() != columns_) {
    // A ClickHouse error met while streaming is written into the body as text.
    error_ = "malformed row (" + std::to_string(fields_.size()) + " fields, expected " +
             std::to_string(columns_) + "): " + std::string(l.substr(0, 300));
    stopped_ = true;
    return false;
  }
  ++rows_;
  if (!on_row_(fields_)) {
    stopped_ = true;
    return false;
  }
  return true;
}

bool TsvStream::feed(std::string_view chunk) {
  if (stopped_) return false;
  size_t start = 0;
  while (true) {
    size_t nl = chunk.find('\n', start);
    if (nl == std::string_view::npos) break;
    bool ok;
    if (partial_.empty()) {
      ok = line(chunk.substr(start, nl - start));
    } else {
      partial_.append(chunk.substr(start, nl - start));
      ok = line(partial_);
      partial_.clear();
    }
    if (!ok) return false;
    start = nl + 1;
  }
  partial_.append(chunk.substr(start));
  return true;
}

bool TsvStream::finish() {
  if (stopped_) return error_.empty();
  if (partial_.empty()) return true;
  error_ = "truncated response (a row without its end): " + partial_.substr(0, 300);
  stopped_ = true;
  return false;
}

}  // namespace ingero::fleet
