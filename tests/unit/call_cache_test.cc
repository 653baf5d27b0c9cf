// The in-memory copy of a window's calls (store/call_cache.h): what it gives back, and what a
// training loop's calls cost in it.
#include "store/call_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

namespace ingero::store {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

// Two ranks' launch loops, interleaved in time as two processes' calls are on one node: each
// rank on its own stream, cycling through four kernels of its own, 10 us apart, 5 us each.
std::vector<Event> two_ranks(size_t n) {
  std::vector<Event> out;
  for (size_t i = 0; i < n; ++i) {
    Event e;
    uint32_t rank = uint32_t(i % 2);
    e.ts_ns = 1'000'000'000 + i * 10'000;
    e.dur_ns = 5'000 + i % 7;
    e.pid = 41'000 + rank;
    e.tid = 41'000 + rank;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = "cudaLaunchKernel";
    e.kind = EventKind::kLaunch;
    e.has_ret = true;
    e.stack_id = 0xabc000 + (i / 2) % 4;
    e.set(Field::kStream, 0x55d0'1234'0000ull + rank * 0x9'0000'0000ull);
    e.set(Field::kFunc, 0x7f31'0000'0000ull + rank * 0x3'0000'0000ull + ((i / 2) % 4) * 0x180);
    e.set(Field::kGridX, 128);
    e.set(Field::kBlockX, 256);
    out.push_back(e);
  }
  return out;
}

// Every member the copy keeps, as text.
std::string text(const Event& e) {
  std::string s =
      std::to_string(e.ts_ns) + ' ' + std::to_string(e.dur_ns) + ' ' + std::to_string(e.pid) + ' ' +
      std::to_string(e.tid) + ' ' + std::string(e.comm_view()) + ' ' + std::string(e.op) + ' ' +
      std::to_string(e.has_ret) + ' ' + std::to_string(e.ret) + ' ' + std::to_string(e.stack_id) +
      ' ' + std::to_string(e.unfinished) + ' ' + std::string(e.peer_comm_view()) + ' ' +
      std::to_string(e.off_cpu_ns) + ' ' + std::to_string(e.preempts) + ' ' +
      std::to_string(e.switches) + ' ' + std::to_string(e.cgroup_id);
  for (size_t f = 0; f < hal::kFieldCount; ++f)
    if (e.has(Field(f))) s += ' ' + std::to_string(f) + '=' + std::to_string(e.fields[f]);
  return s;
}

std::vector<std::string> texts(const std::vector<Event>& calls) {
  std::vector<std::string> out;
  for (const Event& e : calls) out.push_back(text(e));
  return out;
}

// What the copy gives back.
std::vector<std::string> read_back(const CallCache& cache) {
  std::vector<std::string> out;
  cache.for_each([&](const Event& e) { out.push_back(text(e)); }, [](const engine::CallRun&) {});
  return out;
}

// Each thread's calls are encoded against that thread's previous call, not against the
// previous call whatever its thread: two ranks' launches take 15 bytes each (start 3, duration
// 2, flags, thread, name and stack 1 each, stream, grid and block 1 each, kernel 2), not the
// 29 they took when each rank's stream, kernel and thread undid the other's.
TEST(CallCache, InterleavedThreadsAreEncodedAgainstTheirOwnPreviousCall) {
  auto calls = two_ranks(10'000);
  CallCache cache;
  for (const Event& e : calls) ASSERT_TRUE(cache.add(e));
  EXPECT_EQ(cache.calls(), calls.size());
  EXPECT_EQ(cache.calls_per_pid(),
            (std::map<uint32_t, uint64_t>{{41'000, 5'000}, {41'001, 5'000}}));
  EXPECT_LE(cache.encoded_bytes(), 15 * calls.size() + 64);
  EXPECT_EQ(read_back(cache), texts(calls));
}

// A thread's comm, result, rare members and field mask change between its calls, and threads
// come back after others: every call comes back as added.
TEST(CallCache, ChangesWithinAThreadComeBackAsAdded) {
  auto calls = two_ranks(64);
  for (size_t i = 0; i < calls.size(); ++i) {
    Event& e = calls[i];
    if (i % 5 == 0) e.set_comm("pt_main_thread");
    if (i % 3 == 0) e.ret = 700 + int64_t(i);
    if (i % 7 == 0) e.has_ret = false, e.unfinished = true, e.ret = 0;  // no result, none kept
    if (i % 11 == 0) e.off_cpu_ns = 12'345, e.preempts = 1, e.switches = 2;
    if (i % 11 == 0) e.set_peer_comm("hog");
    if (i % 13 == 0) e.cgroup_id = 0x4242;
    if (i % 4 == 1) e.set(Field::kBytes, 4096 * i);
    if (i % 9 == 0) e.tid += 3;  // a third and fourth thread now and then
  }
  CallCache cache;
  for (const Event& e : calls) ASSERT_TRUE(cache.add(e));
  EXPECT_EQ(read_back(cache), texts(calls));
}

// Each reader of the copy keeps ~300 bytes for every thread: past kMaxThreads threads the copy
// takes no more calls (the window is then read from the file, as one over the memory limit),
// while the threads it has may go on.
TEST(CallCache, ThreadsPastTheLimitAreRefused) {
  CallCache cache;
  Event e = two_ranks(1)[0];
  for (size_t i = 0; i < CallCache::kMaxThreads; ++i) {
    e.tid = uint32_t(1000 + i);
    e.ts_ns += 1000;
    ASSERT_TRUE(cache.add(e)) << i;
  }
  e.tid = uint32_t(1000 + CallCache::kMaxThreads);
  EXPECT_FALSE(cache.add(e));
  engine::CallRun r;
  r.pid = e.pid;
  r.tid = e.tid;
  r.calls = 2;
  EXPECT_FALSE(cache.add_run(r));
  e.tid = 1000;  // a thread it has
  EXPECT_TRUE(cache.add(e));
  EXPECT_EQ(cache.calls(), CallCache::kMaxThreads + 1);
}

// Adds two ranks' launches (15 bytes each in the copy) until the copy refuses one; returns how
// many it took.
size_t fill_until_refused(CallCache& cache, size_t max_calls) {
  Event e = two_ranks(1)[0];
  for (size_t i = 0; i < max_calls; ++i) {
    e.ts_ns += 10'000;
    e.dur_ns = 5'000 + i % 7;
    if (!cache.add(e)) return i;
  }
  return max_calls;
}

// A reader that knows how many calls its window holds gives the copy up once its first chunk
// shows they cannot fit, not at its limit: the session's analysis at full rate filled 12 MB of
// a copy it then threw away, which was the top of the tracer's memory.
TEST(CallCache, ACopyThatCannotHoldTheExpectedCallsGivesUpAfterItsFirstChunk) {
  constexpr size_t kLimit = size_t(16) << 20;
  CallCache blind;
  blind.set_limit(kLimit);
  size_t took_blind = fill_until_refused(blind, 2'000'000);
  EXPECT_GT(blind.bytes(), size_t(12) << 20);  // to the limit, then refused
  EXPECT_LT(took_blind, size_t(2'000'000));

  CallCache told;
  told.set_limit(kLimit);
  told.set_expected(2'000'000);  // ~30 MB of calls: more than the limit by over a quarter
  size_t took = fill_until_refused(told, 2'000'000);
  EXPECT_EQ(told.bytes() / CallCache::kChunkBytes, 1u);  // one chunk, then refused
  EXPECT_LT(took, took_blind / 2);
  EXPECT_EQ(told.calls(), took);
}

// Expected calls that fit (within a quarter over the limit's worth) are all kept.
TEST(CallCache, ACopyThatCanHoldTheExpectedCallsKeepsThemAll) {
  CallCache cache;
  cache.set_limit(size_t(16) << 20);
  cache.set_expected(900'000);  // ~13.5 MB
  EXPECT_EQ(fill_until_refused(cache, 900'000), 900'000u);
  EXPECT_EQ(cache.calls(), 900'000u);
}

// Another reader of the window gave up (the whole cannot fit): the copy takes no new chunk.
TEST(CallCache, ACopyStopsAtItsNextChunkOnceTheOtherReaderGaveUp) {
  std::atomic<bool> stop = false;
  CallCache cache;
  cache.set_stop(&stop);
  Event e = two_ranks(1)[0];
  ASSERT_TRUE(cache.add(e));
  stop = true;
  size_t more = fill_until_refused(cache, 1'000'000);
  EXPECT_EQ(cache.bytes() / CallCache::kChunkBytes, 1u);
  // The chunk it has still fills (~350,000 launches of 12 bytes), and no other.
  EXPECT_GT(more, 300'000u);
  EXPECT_LT(more, 400'000u);
}

}  // namespace
}  // namespace ingero::store
