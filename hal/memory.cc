#include "hal/memory.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <new>

namespace ingero::hal {

MemoryInfo read_memory_info(const std::string& path) {
  MemoryInfo m;
  std::ifstream in(path);
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemTotal:") m.total = kib << 10;
    if (key == "MemAvailable:") m.available = kib << 10;
  }
  return m;
}

size_t memory_share(const MemoryInfo& m, size_t lo, size_t hi) {
  uint64_t share = std::min(m.total / 8, m.available / 4);
  return size_t(std::clamp<uint64_t>(share, lo, std::max(lo, hi)));
}

void advise_huge_pages(void* p, size_t bytes) {
  if (bytes < (size_t(4) << 20)) return;
  uintptr_t begin = uintptr_t(p), page = (begin + 4095) & ~uintptr_t(4095);
  (void)madvise(reinterpret_cast<void*>(page), bytes - (page - begin), MADV_HUGEPAGE);
}

void* alloc_huge_pages(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  void* p = std::aligned_alloc(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  if (p) advise_huge_pages(p, bytes);
  return p;
}

namespace {
size_t whole_pages(size_t bytes) { return (bytes + 4095) & ~size_t(4095); }
}  // namespace

void* remap_pages(void* old, size_t old_bytes, size_t bytes) {
  void* p = old ? mremap(old, whole_pages(old_bytes), whole_pages(bytes), MREMAP_MAYMOVE)
                : mmap(nullptr, whole_pages(bytes), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  advise_huge_pages(p, bytes);
  return p;
}

void unmap_pages(void* p, size_t bytes) {
  if (p) munmap(p, whole_pages(bytes));
}

namespace {

class HugePageResource final : public std::pmr::memory_resource {
  static constexpr size_t kLarge = size_t(1) << 20;
  void* do_allocate(size_t bytes, size_t align) override {
    if (bytes < kLarge || align > (size_t(2) << 20))
      return ::operator new(bytes, std::align_val_t(align));
    void* p = alloc_huge_pages(bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void* p, size_t bytes, size_t align) override {
    if (bytes < kLarge || align > (size_t(2) << 20))
      ::operator delete(p, std::align_val_t(align));
    else
      std::free(p);
  }
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }
};

}  // namespace

std::pmr::memory_resource* huge_page_resource() {
  static HugePageResource r;
  return &r;
}

void return_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
}

void keep_freed_memory() {
  // glibc's largest mmap threshold on 64-bit (DEFAULT_MMAP_THRESHOLD_MAX); the trim threshold
  // stays at its default, so a heap still shrinks when its top is free.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
}

}  // namespace ingero::hal
