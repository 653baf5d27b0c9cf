// A response body produced over time: Server-Sent Events (MCP notifications, a dashboard's
// live updates) or a large body made in pieces. Create one with Response::streaming(), return
// the Response from the handler, and keep the Stream in whatever thread produces the data.
// The I/O thread sends each write() as one HTTP chunk, in order.
//
// Thread-safe. A Stream never blocks the server's I/O thread: write() waits only in the
// producer's thread, and only while the client reads more slowly than the producer writes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ingero::serve::http {

namespace detail {
struct StreamLink;
}

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Queues `data` to be sent as one chunk (empty data is ignored). While more than the
  // server's Limits::max_stream_buffer bytes wait to be sent, waits for the client to read,
  // up to Limits::write_timeout; then the connection is closed as too slow.
  // Returns false when the data will never be sent: the client left, it was too slow, the
  // server is stopping, or close() was called. The producer should then stop.
  // Data written before the handler has returned is queued (up to the same limit): write more
  // than that only from another thread, or the handler waits for itself.
  bool write(std::string_view data);
  // Ends the body once everything written so far is sent. Idempotent.
  void close();
  // False once the stream has ended, for any reason.
  bool open() const;
  // `f` runs once when the stream ends: after the last chunk is sent, or when the client
  // leaves, is too slow, or the server stops. It runs on a server thread or, when the stream
  // has already ended, at once in the caller's; it must not block.
  void on_close(std::function<void()> f);

 private:
  friend struct detail::StreamLink;

  mutable std::mutex mu_;
  std::condition_variable space_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  size_t max_buffered_ = 1 << 20;
  std::chrono::milliseconds write_timeout_{30000};
  bool finished_ = false;       // close() called
  bool ended_ = false;          // nothing more will be sent
  std::function<void()> wake_;  // set by the connection: "data or close() is waiting"
  std::vector<std::function<void()>> on_close_;
};

}  // namespace ingero::serve::http
