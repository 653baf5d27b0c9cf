// Standard output whose failure is known: std::cout goes through a buffer that writes to file
// descriptor 1 and keeps the first error with its errno, so a command whose output did not
// arrive (a full disk, /dev/full, a closed pipe) can say why and exit non-zero instead of 0.
#pragma once

#include <memory>
#include <streambuf>

#include "hal/result.h"

namespace ingero::app {

class CheckedStdout {
 public:
  CheckedStdout();   // installs the buffer on std::cout
  ~CheckedStdout();  // flushes and restores std::cout's own buffer
  CheckedStdout(const CheckedStdout&) = delete;
  CheckedStdout& operator=(const CheckedStdout&) = delete;
  // Flushes; the first write error since start, naming its cause.
  Status finish();

 private:
  class Buffer;
  std::unique_ptr<Buffer> buf_;
  std::streambuf* old_ = nullptr;
};

}  // namespace ingero::app
