// Reads the session's three ring buffers (calls, aux, host; probe/bpf_ring.h) and hands every
// record to one callback, aux first: a call's stack record is submitted before the call record, on
// the aux ring, so consuming aux before calls finds the stack already known. consume_aux() lets a
// consumer that still meets an unknown stack (submitted while calls were being read) catch up.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hal/result.h"
#include "probe/bpf_ring.h"

namespace ingero::hal {

class RingReader {
 public:
  using Callback = std::function<void(const void* data, size_t size)>;
  // A negative fd leaves that ring out.
  static Result<std::unique_ptr<RingReader>> create(int calls_fd, int aux_fd, int host_fd,
                                                    Callback cb);
  ~RingReader();
  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  // Waits up to timeout_ms for a wake-up, then consumes everything queued (the BPF side skips
  // wake-ups for small amounts of data, so a timeout does not mean the rings are empty).
  // Returns the records consumed; EINTR is not an error.
  Result<int> poll(int timeout_ms);
  // A flag that poll() clears while it waits and sets once it stops waiting, shared with the
  // BPF programs, which skip a wake-up while it is set and set it when they wake the reader
  // (BpfSession::reader_busy_flag). Without one, nothing clears it: after the programs' first
  // wake-up, the reader's timeouts alone end its waits.
  void set_busy_flag(volatile uint32_t* flag) { busy_ = flag; }
  // Consumes everything currently queued without waiting.
  Result<int> drain();
  // Consumes what the aux ring holds now (stacks arriving while calls are read).
  Result<int> consume_aux();

 private:
  RingReader() = default;
  // Each ring's data mapped once (probe/bpf_ring.h).
  std::unique_ptr<BpfRing> calls_, aux_, host_;
  int epoll_fd_ = -1;
  volatile uint32_t* busy_ = nullptr;
  Callback cb_;
};

}  // namespace ingero::hal
