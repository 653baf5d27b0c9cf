// A growable array of trivially copyable values that grows with realloc: what the host context
// keeps a process's off-CPU intervals in (a million of them in a session with ~1 context
// switch a call).
//
// std::vector grows by allocating twice the room and copying into it: the old and the new
// storage live at once, and every page of each is faulted in. Past glibc's mmap threshold a
// block is its own mapping, and realloc moves it with mremap: its pages move without a copy or
// a fault, and the peak is the final size, not one and a half times it. In the tracer's
// session analysis of 670,000 switches the intervals' peak was 50 MB with std::vector.
//
// The subset of std::vector's interface the engine uses: push_back, size, empty, operator[],
// back, begin/end (pointers), data. Throws std::bad_alloc when memory runs out, as
// std::vector does.
#pragma once

#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace ingero::engine {

template <class T>
class PodVector {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "PodVector moves its values with realloc");

 public:
  PodVector() = default;
  PodVector(const PodVector& o) { copy_from(o); }
  PodVector(PodVector&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)),
        n_(std::exchange(o.n_, 0)),
        cap_(std::exchange(o.cap_, 0)) {}
  PodVector& operator=(const PodVector& o) {
    if (this != &o) {
      std::free(p_);
      p_ = nullptr;
      n_ = cap_ = 0;
      copy_from(o);
    }
    return *this;
  }
  PodVector& operator=(PodVector&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }
  ~PodVector() { std::free(p_); }

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

 private:
  void grow(size_t cap) {
    void* p = std::realloc(static_cast<void*>(p_), cap * sizeof(T));
    if (!p) throw std::bad_alloc();
    p_ = static_cast<T*>(p);
    cap_ = cap;
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
