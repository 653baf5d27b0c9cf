// The consumer side of one BPF ring buffer (BPF_MAP_TYPE_RINGBUF), with its data mapped once.
//
// libbpf's consumer maps a ring's data twice, back to back, so that a record running past the
// end reads as one piece. The kernel fills every page of both views when they are mapped, so
// a ring counted twice in the tracer's RSS: 24 MiB for the session's 12 MiB of rings. Here the
// data is mapped once and the few records that wrap are copied whole before they are handed
// over.
//
// The layout read (the kernel's, include/uapi/linux/bpf.h): a page holding the consumer's
// position (the only page mapped writable), then a page holding the producer's, then the data,
// a power of two in size. Each record starts 8-aligned with an 8-byte header: its length, with
// BPF_RINGBUF_BUSY_BIT while the producer writes it and BPF_RINGBUF_DISCARD_BIT when it was
// thrown away.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hal/result.h"

namespace ingero::hal {

using RingCallback = std::function<void(const void* data, size_t size)>;

// The memory a consumer reads, wherever it is mapped (tests lay it out in ordinary memory).
struct RingView {
  uint64_t* consumer_pos = nullptr;
  const uint64_t* producer_pos = nullptr;
  const uint8_t* data = nullptr;
  uint64_t size = 0;  // a power of two
};

// How far the consumer reads before it gives the space back to the producers: a sixteenth of
// the ring at a time, and all it read when a pass ends or stops. Every reservation in the kernel
// reads the consumer's position; moved after each record, its cache line crossed between the
// reader's CPU and the traced thread's at every launch while the reader drained (~30 ns a
// launch, bench/launch_cost.sh). Fifteen sixteenths stay free to the producers meanwhile.
inline uint64_t release_step(uint64_t ring_size) { return ring_size / 16; }

// Hands every record committed from the consumer's position on to `cb`, in order, and moves
// the position past what was read: every release_step() bytes, when a pass ends and where it
// stops. Stops at a record still being written; skips discarded ones. A record running past the
// end of `data` is copied whole into `scratch` first. Returns how many records `cb` got.
int consume_ring(const RingView& ring, std::vector<uint8_t>& scratch, const RingCallback& cb);

class BpfRing {
 public:
  // Maps the ring of map `fd` (not owned; it must outlive the BpfRing).
  static Result<std::unique_ptr<BpfRing>> open(int fd);
  ~BpfRing();
  BpfRing(const BpfRing&) = delete;
  BpfRing& operator=(const BpfRing&) = delete;

  int fd() const { return fd_; }
  int consume(const RingCallback& cb) { return consume_ring(view_, scratch_, cb); }

 private:
  BpfRing() = default;
  int fd_ = -1;
  void* consumer_ = nullptr;  // one page, writable
  void* producer_ = nullptr;  // the producer's page, then the data: read-only
  size_t page_ = 0;
  RingView view_;
  std::vector<uint8_t> scratch_;
};

}  // namespace ingero::hal
