#include "store/trace_cache.h"

#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/json_text.h"

namespace ingero::store {

FileStamp file_stamp(const std::string& path) {
  FileStamp s;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    s.size = int64_t(st.st_size);
    s.mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    s.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
    s.dev = uint64_t(st.st_dev);
    s.ino = uint64_t(st.st_ino);
  }
  std::string wal = path + "-wal";
  if (stat(wal.c_str(), &st) == 0) {
    s.wal_size = int64_t(st.st_size);
    s.wal_mtime_ns = int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    s.wal_ino = int64_t(st.st_ino);
  }
  return s;
}

TraceCache::TraceCache(std::string path, Compute compute, std::chrono::milliseconds min_age)
    : path_(std::move(path)), compute_(std::move(compute)), min_age_(min_age) {}

uint64_t TraceCache::computations() const {
  std::lock_guard<std::mutex> g(mu_);
  return entry_.generation;
}

TraceCache::Entry TraceCache::get() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto now = std::chrono::steady_clock::now();
    if (have_ && (now - computed_at_ < min_age_ || file_stamp(path_) == stamp_)) return entry_;
    if (!computing_) break;
    cv_.wait(lock, [&] { return !computing_; });
    if (have_) return entry_;  // the computation we waited for is as fresh as it gets
  }
  computing_ = true;
  // The stamp before reading: a change made while computing triggers the next computation.
  FileStamp stamp = file_stamp(path_);
  lock.unlock();
  auto t0 = std::chrono::steady_clock::now();
  Result<std::string> r = make_error("not computed");
  try {
    r = compute_();
  } catch (const std::exception& e) {
    r = make_error(std::string("computing the result failed: ") + e.what());
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  lock.lock();
  Entry e;
  e.ok = r.ok();
  e.body = std::make_shared<const std::string>(
      r ? std::move(*r) : engine::json_text({{"error", r.error().message}}));
  e.generation = entry_.generation + 1;
  // The body's own digest: a generation count started again at "g1" in every process, so that a
  // dashboard restarted on another trace answered an open tab's "g1" with 304 Not Modified.
  uint64_t h = 1469598103934665603ull;  // FNV-1a, 64 bits
  for (unsigned char c : *e.body) h = (h ^ c) * 1099511628211ull;
  char tag[24];
  std::snprintf(tag, sizeof tag, "\"%016llx\"", static_cast<unsigned long long>(h));
  e.etag = tag;
  e.compute_s = secs;
  entry_ = std::move(e);
  stamp_ = stamp;
  computed_at_ = std::chrono::steady_clock::now();
  have_ = true;
  computing_ = false;
  cv_.notify_all();
  return entry_;
}

}  // namespace ingero::store
