// A growable array of trivially copyable values that grows without copying: what the host
// context keeps a process's off-CPU intervals in (a million of them in a session with ~1
// context switch a call).
//
// std::vector grows by allocating twice the room and copying into it: the old and the new
// storage live at once, and every page of each is faulted in. Past 1 MiB a PodVector's values
// are a mapping of their own (hal::remap_pages), which the kernel grows or moves with mremap:
// its pages move without a copy or a fault, and the peak is the final size, not one and a half
// times it (in the tracer's session analysis of 670,000 switches the intervals' peak was 50 MB
// with std::vector). It does not leave that to realloc: under `explain`'s malloc settings
// (hal::keep_freed_memory) blocks under 32 MiB come from malloc's heaps, where realloc copies
// (47% of the page faults of `explain` on the step proxy's trace). The mapping is advised onto
// transparent huge pages past 4 MiB: the pages a million intervals fill for the first time are
// faulted in 2 MiB at a time, not 4 KiB.
//
// The subset of std::vector's interface the engine uses: push_back, size, empty, operator[],
// back, begin/end (pointers), data; and erase_front. Throws std::bad_alloc when memory runs out, as
// std::vector does.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "hal/memory.h"

namespace ingero::engine {

template <class T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodVector moves its values as bytes");

 public:
  PodVector() = default;
  PodVector(const PodVector& o) { copy_from(o); }
  PodVector(PodVector&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        n_(std::exchange(o.n_, 0)),
        cap_(std::exchange(o.cap_, 0)) {}
  PodVector& operator=(const PodVector& o) {
    if (this != &o) {
      release();
      copy_from(o);
    }
    return *this;
  }
  PodVector& operator=(PodVector&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~PodVector() { release(); }

  void push_back(const T& x) {
    if (n_ == cap_) {
      T copy = x;  // x may be one of ours, which the growth moves
      grow(cap_ ? 2 * cap_ : 64);
      std::memcpy(static_cast<void*>(p_ + n_), &copy, sizeof(T));
    } else {
      std::memcpy(static_cast<void*>(p_ + n_), &x, sizeof(T));
    }
    ++n_;
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T& back() { return p_[n_ - 1]; }
  const T& back() const { return p_[n_ - 1]; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  // Drops the first n values (one move of the rest).
  void erase_front(size_t n) {
    if (n >= n_) n = n_;
    if (n && n < n_) std::memmove(static_cast<void*>(p_), p_ + n, (n_ - n) * sizeof(T));
    n_ -= n;
  }

 private:
  static constexpr size_t kMappedBytes = size_t(1) << 20;
  // Whether values of `cap` are kept in a mapping of their own (else in malloc's memory).
  static bool mapped(size_t cap) { return cap * sizeof(T) >= kMappedBytes; }

  void grow(size_t cap) {
    void* p = nullptr;
    if (!mapped(cap)) {
      p = std::realloc(static_cast<void*>(p_), cap * sizeof(T));
    } else if (mapped(cap_)) {
      p = hal::remap_pages(p_, cap_ * sizeof(T), cap * sizeof(T));
    } else if ((p = hal::remap_pages(nullptr, 0, cap * sizeof(T)))) {
      if (n_) std::memcpy(p, static_cast<void*>(p_), n_ * sizeof(T));  // under 1 MiB
      std::free(p_);
    }
    if (!p) throw std::bad_alloc();
    p_ = static_cast<T*>(p);
    cap_ = cap;
  }
  void release() {
    if (mapped(cap_))
      hal::unmap_pages(p_, cap_ * sizeof(T));
    else
      std::free(p_);
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  void copy_from(const PodVector& o) {
    if (o.n_ == 0) return;
    grow(o.n_);
    std::memcpy(static_cast<void*>(p_), o.p_, o.n_ * sizeof(T));
    n_ = o.n_;
  }

  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

}  // namespace ingero::engine
