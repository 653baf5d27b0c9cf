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
      if (control(s[i]) || lead_ || s[i] == kC1Lead) {
        to_.write(s + from, i - from);
        put(s[i]);
        from = i + 1;
      }
    to_.write(s + from, n - from);
    return to_ ? n : 0;
  }
  int sync() override {
    settle();
    return to_.flush() ? 0 : -1;
  }

 private:
  // U+0080..U+009F, the C1 controls, are 0xC2 then 0x80..0x9F in UTF-8: U+009B is CSI, an
  // escape sequence's start to a terminal that takes C1 (query's table printed it raw).
  static constexpr char kC1Lead = char(0xC2);
  void settle() {
    if (lead_) to_.put(kC1Lead);
    lead_ = false;
  }
  static bool control(char c) {
    auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\n' && c != '\t') || u == 0x7f;
  }
  void put(char c) {
    static const char* hex = "0123456789abcdef";
    auto u = static_cast<unsigned char>(c);
    if (lead_) {
      lead_ = false;
      if (u >= 0x80 && u <= 0x9f) {
        const char esc[6] = {'\\', 'u', '0', '0', hex[u >> 4], hex[u & 15]};
        to_.write(esc, 6);
        return;
      }
      to_.put(kC1Lead);
    }
    if (c == kC1Lead) {
      lead_ = true;  // decided by the next byte
      return;
    }
    if (!control(c)) {
      to_.put(c);
      return;
    }
    const char esc[4] = {'\\', 'x', hex[u >> 4], hex[u & 15]};
    to_.write(esc, 4);
  }
  std::ostream& to_;
  bool lead_ = false;
};

TerminalText::TerminalText(std::ostream& to)
    : std::ostream(nullptr), buf_(std::make_unique<Buffer>(to)) {
  rdbuf(buf_.get());
}

TerminalText::~TerminalText() { flush(); }

}  // namespace ingero::app
