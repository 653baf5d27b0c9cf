#include "app/terminal_text.h"

namespace ingero::app {

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    if (ch == '\n')
      out += "\\n";
    else if (ch == '\t')
      out += "\\t";
    else if (ch == '\r')
      out += "\\r";
    else
      out += ch;
  }
  return out;
}

class TerminalText::Buffer : public std::streambuf {
 public:
  explicit Buffer(std::ostream& to) : to_(to) {}

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    put(char(c));
    return to_ ? c : traits_type::eof();
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::streamsize from = 0;
    for (std::streamsize i = 0; i < n; ++i)
      if (control(s[i])) {
        to_.write(s + from, i - from);
        put(s[i]);
        from = i + 1;
      }
    to_.write(s + from, n - from);
    return to_ ? n : 0;
  }
  int sync() override { return to_.flush() ? 0 : -1; }

 private:
  static bool control(char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
  }
  void put(char c) {
    if (!control(c)) {
      to_.put(c);
      return;
    }
    static const char* hex = "0123456789abcdef";
    auto u = static_cast<unsigned char>(c);
    const char esc[4] = {'\\', 'x', hex[u >> 4], hex[u & 15]};
    to_.write(esc, 4);
  }
  std::ostream& to_;
};

TerminalText::TerminalText(std::ostream& to)
    : std::ostream(nullptr), buf_(std::make_unique<Buffer>(to)) {
  rdbuf(buf_.get());
}

TerminalText::~TerminalText() { flush(); }

}  // namespace ingero::app
