// Internal: the connection's side of a Stream (not part of the library's API).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "serve/http/stream.h"

namespace ingero::serve::http::detail {

struct StreamLink {
  // Binds the stream to a connection: `wake` is called (from any thread, possibly under no
  // lock of the connection) whenever data or the end is waiting.
  static void attach(Stream& s, size_t max_buffered, std::chrono::milliseconds write_timeout,
                     std::function<void()> wake);
  // Moves up to `max_bytes` of queued data (whole writes, at least one) into `out`. Returns
  // true when the producer has closed the stream and nothing is left after this take.
  static bool take(Stream& s, std::string& out, size_t max_bytes);
  // True once end() ran (for example a producer's write() timed out on a slow reader).
  static bool ended(const Stream& s);
  // The stream has ended (last chunk sent, or the connection is gone): wakes blocked writers,
  // refuses further writes, and runs the on_close callbacks in this thread.
  static void end(Stream& s);
};

}  // namespace ingero::serve::http::detail
