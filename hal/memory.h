// The machine's memory, for the analyses that size their in-memory copies by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory_resource>
#include <string>

namespace ingero::hal {

struct MemoryInfo {
  uint64_t total = 0, available = 0;  // bytes; 0 when unknown
};

// MemTotal and MemAvailable from /proc/meminfo (or `path`); zeros when it cannot be read.
MemoryInfo read_memory_info(const std::string& path = "/proc/meminfo");

// What one in-memory copy of an analysis may take: an eighth of the machine's memory or a
// quarter of what is available now, whichever is less, at least `lo` and at most `hi` (`lo`
// when the memory is unknown).
size_t memory_share(const MemoryInfo& m, size_t lo, size_t hi);

// Asks the kernel to back [p, p + bytes) with transparent huge pages where it gives them on
// request (transparent_hugepage=madvise or always): a buffer of millions of items filled for
// the first time then takes one page fault per 2 MiB instead of one per 4 KiB, and faults are
// dear in a VM. A no-op under 4 MiB.
void advise_huge_pages(void* p, size_t bytes);
// `bytes` aligned to 2 MiB, so that every 2 MiB of it can be a huge page, and advised so;
// nullptr when out of memory. Release it with std::free.
void* alloc_huge_pages(size_t bytes);

// A buffer of its own mapping (anonymous, private, zeroed): `old` (nullptr: none) of
// `old_bytes` grown or shrunk to `bytes`, moved by the kernel where it must (mremap: pages move,
// nothing is copied or faulted in again), and advised onto huge pages past 4 MiB. nullptr when
// out of memory, and `old` is then kept. Release it with unmap_pages and its size.
void* remap_pages(void* old, size_t old_bytes, size_t bytes);
void unmap_pages(void* p, size_t bytes);

// Memory for a pool of many small lists (std::pmr::unsynchronized_pool_resource upstream):
// requests of 1 MiB or more (the pool's chunks once it has grown) in huge pages, smaller ones
// from operator new. Stateless and thread-safe: one instance serves every pool.
std::pmr::memory_resource* huge_page_resource();

// How malloc treats memory freed, set once for the process:
//  - a long-running agent gives it back: blocks of 128 KiB or more are mapped on their own and
//    unmapped when freed, and the heap is trimmed past 128 KiB free at its top;
//  - one analysis, which exits when done, keeps it: blocks under 32 MiB come from malloc's
//    heaps, where the next allocation reuses what an earlier one freed instead of faulting
//    fresh pages in (docs/performance.md: explain at 10 M events, 2.14-2.29 s -> 1.91-1.97 s).
// glibc's default starts at 128 KiB and raises it after each large free; both fix it.
void return_freed_memory();
void keep_freed_memory();

}  // namespace ingero::hal
