// Text bound for a terminal: a traced system's names (a process's comm, which any process sets;
// a node name shipped from another host) may hold escape sequences that retitle, clear or
// rewrite the reader's terminal. Through TerminalText, control characters other than newline
// and tab are written as \xHH.
#pragma once

#include <memory>
#include <ostream>
#include <streambuf>

namespace ingero::app {

class TerminalText : public std::ostream {
 public:
  explicit TerminalText(std::ostream& to);
  ~TerminalText() override;

 private:
  class Buffer;
  std::unique_ptr<Buffer> buf_;
};

}  // namespace ingero::app
