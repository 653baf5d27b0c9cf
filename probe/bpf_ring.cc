#include "probe/bpf_ring.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ingero::hal {

int consume_ring(const RingView& ring, std::vector<uint8_t>& scratch, const RingCallback& cb) {
  const uint64_t mask = ring.size - 1;
  const uint64_t step = release_step(ring.size);
  uint64_t cons = __atomic_load_n(ring.consumer_pos, __ATOMIC_ACQUIRE);
  uint64_t released = cons;
  auto release = [&] {
    if (cons == released) return;
    __atomic_store_n(ring.consumer_pos, cons, __ATOMIC_RELEASE);
    released = cons;
  };
  int n = 0;
  bool more = true;
  while (more) {  // until a pass finds nothing new: records committed meanwhile are read too
    more = false;
    uint64_t prod = __atomic_load_n(ring.producer_pos, __ATOMIC_ACQUIRE);
    while (cons < prod) {
      // Headers are 8-aligned in a data area of whole pages: a header never wraps.
      const uint8_t* hdr = ring.data + (cons & mask);
      uint32_t len = __atomic_load_n(reinterpret_cast<const uint32_t*>(hdr), __ATOMIC_ACQUIRE);
      if (len & BPF_RINGBUF_BUSY_BIT) {  // still being written: later records wait
        release();
        return n;
      }
      more = true;
      uint32_t size = len & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
      if (!(len & BPF_RINGBUF_DISCARD_BIT)) {
        uint64_t at = (cons + BPF_RINGBUF_HDR_SZ) & mask;
        if (at + size <= ring.size) {
          cb(ring.data + at, size);
        } else {  // runs past the end: its two pieces, copied together
          if (scratch.size() < size) scratch.resize(size);
          uint64_t first = ring.size - at;
          std::memcpy(scratch.data(), ring.data + at, first);
          std::memcpy(scratch.data() + first, ring.data, size - first);
          cb(scratch.data(), size);
        }
        ++n;
      }
      cons += (uint64_t(size) + BPF_RINGBUF_HDR_SZ + 7) & ~uint64_t(7);
      if (cons - released >= step) release();
    }
    release();
  }
  return n;
}

Result<std::unique_ptr<BpfRing>> BpfRing::open(int fd) {
  bpf_map_info info{};
  uint32_t info_len = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &info_len) != 0)
    return Error::sys("reading the ring buffer's size", errno);
  if (info.type != BPF_MAP_TYPE_RINGBUF || info.max_entries == 0 ||
      (info.max_entries & (info.max_entries - 1)))
    return Error{"map " + std::to_string(fd) + " is not a ring buffer", EINVAL};
  std::unique_ptr<BpfRing> r(new BpfRing());
  r->fd_ = fd;
  r->page_ = size_t(sysconf(_SC_PAGESIZE));
  void* cons = mmap(nullptr, r->page_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (cons == MAP_FAILED) return Error::sys("mapping the ring buffer", errno);
  r->consumer_ = cons;
  // The producer's page and the data, once (offset: one page).
  void* prod =
      mmap(nullptr, r->page_ + info.max_entries, PROT_READ, MAP_SHARED, fd, off_t(r->page_));
  if (prod == MAP_FAILED) return Error::sys("mapping the ring buffer", errno);
  r->producer_ = prod;
  r->view_.consumer_pos = static_cast<uint64_t*>(cons);
  r->view_.producer_pos = static_cast<const uint64_t*>(prod);
  r->view_.data = static_cast<const uint8_t*>(prod) + r->page_;
  r->view_.size = info.max_entries;
  return r;
}

BpfRing::~BpfRing() {
  if (consumer_) munmap(consumer_, page_);
  if (producer_) munmap(producer_, page_ + size_t(view_.size));
}

}  // namespace ingero::hal
