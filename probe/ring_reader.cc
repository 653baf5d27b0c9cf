#include "probe/ring_reader.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ingero::hal {
namespace {

Error ring_error(const std::string& what, int err) {
  if (err < 0) err = -err;
  return Error{what + ": " + std::strerror(err), err};
}

}  // namespace

Result<std::unique_ptr<RingReader>> RingReader::create(int calls_fd, int aux_fd, int host_fd,
                                                       Callback cb) {
  std::unique_ptr<RingReader> r(new RingReader());
  r->cb_ = std::move(cb);
  r->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (r->epoll_fd_ < 0) return ring_error("creating the ring buffer poller", errno);
  auto add = [&](int fd, std::unique_ptr<BpfRing>* out) -> Status {
    if (fd < 0) return {};
    auto ring = BpfRing::open(fd);
    if (!ring) return ring.error();
    *out = std::move(*ring);
    epoll_event ev{};
    ev.events = EPOLLIN;
    if (epoll_ctl(r->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0)
      return ring_error("polling the ring buffer", errno);
    return {};
  };
  for (auto [fd, out] : {std::pair{aux_fd, &r->aux_}, std::pair{calls_fd, &r->calls_},
                         std::pair{host_fd, &r->host_}})
    if (auto st = add(fd, out); !st) return st.error();
  return r;
}

RingReader::~RingReader() {
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Result<int> RingReader::consume_aux() { return aux_ ? aux_->consume(cb_) : 0; }

Result<int> RingReader::drain() {
  int total = 0;
  for (BpfRing* rb : {aux_.get(), calls_.get(), host_.get()})
    if (rb) total += rb->consume(cb_);
  return total;
}

Result<int> RingReader::poll(int timeout_ms) {
  epoll_event evs[3];
  if (busy_) __atomic_store_n(busy_, 0u, __ATOMIC_SEQ_CST);
  int n = epoll_wait(epoll_fd_, evs, 3, timeout_ms);
  if (busy_) __atomic_store_n(busy_, 1u, __ATOMIC_SEQ_CST);
  if (n < 0 && errno != EINTR) return ring_error("polling the ring buffers", errno);
  return drain();
}

}  // namespace ingero::hal
