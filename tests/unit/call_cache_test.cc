// The in-memory copy of a window's calls (store/call_cache.h): what it gives back, and what a
// training loop's calls cost in it.
#include "store/call_cache.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ingero::store
