// Text bound for a terminal: a traced system's names (a process's comm, which any process sets;
// a node name shipped from another host) may hold escape sequences that retitle, clear or
// rewrite the reader's terminal. Through TerminalText, control characters other than newline
// and tab are written as \xHH, and the C1 controls (U+0080..U+009F in UTF-8) as \u00HH.
#pragma once

#include <memory>
#include <ostream>
#include <streambuf>
#include <string>
#include <string_view>

namespace ingero::app {

// Anyone's bytes inside a line of output (a library's path, a value in a table): a newline, tab
// or carriage return is written as \n, \t, \r, so that it can neither start a line of its own
// (a library file named "x\n  [pass] privileges root" forged verdicts in root's `check`) nor
// pass for a space. Other control characters are TerminalText's.
std::string one_line(std::string_view s);

class TerminalText : public std::ostream {
 public:
  explicit TerminalText(std::ostream& to);
  ~TerminalText() override;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buf_;
};

}  // namespace ingero::app
