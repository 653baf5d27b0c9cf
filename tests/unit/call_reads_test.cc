// How the engine reads calls from our files: straight from the events table (the contract
// view joins the dictionaries on every row), and once per window (later passes decode the
// in-memory copy). Both must give exactly what was written.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "hal/memory.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr int64_t kOffset = 1'000'000'000'000;

// Every member of a call that the engine reads, as text, timestamps in wall-clock ns.
std::string describe(const Event& e, int64_t offset) {
  std::ostringstream o;
  o << e.ts_ns + uint64_t(offset) << ' ' << e.dur_ns << ' ' << e.pid << ' ' << e.tid << ' '
    << e.comm_view() << ' ' << e.cgroup_id << ' ' << e.vendor << ' ' << e.api << ' ' << e.op << ' '
    << int(e.kind) << ' ' << e.has_ret << ' ' << (e.has_ret ? e.ret : 0) << ' ' << e.unfinished
    << ' ' << e.off_cpu_ns << ' ' << e.preempts << ' ' << e.switches << ' ' << e.peer_comm_view()
    << ' ' << e.stack_id << " fields";
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (e.has(Field(i))) o << ' ' << hal::field_name(Field(i)) << '=' << e.fields[i];
  return o.str();
}

// Calls of several kinds, vendors, processes and threads, with every optional member set on
// some of them; written in start-time order.
std::vector<Event> sample_calls(size_t n) {
  std::mt19937_64 rng(7);
  struct Op {
    const char *vendor, *api, *op;
    EventKind kind;
  };
  const Op ops[] = {{"nvidia", "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch},
                    {"nvidia", "cuda_driver", "cuLaunchKernel", EventKind::kLaunch},
                    {"nvidia", "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy},
                    {"amd", "hip", "hipStreamSynchronize", EventKind::kSync},
                    {"nvidia", "nccl", "ncclAllReduce", EventKind::kCollective}};
  std::vector<Event> out;
  uint64_t ts = 1000;
  for (size_t i = 0; i < n; ++i) {
    const Op& op = ops[rng() % 5];
    Event e;
    ts += rng() % 3 == 0 ? 0 : rng() % 5000;  // equal start times happen
    e.ts_ns = ts;
    e.dur_ns = rng() % 2 ? rng() % 100 : rng() % 10'000'000'000ull;
    e.pid = 100 + uint32_t(rng() % 3);
    e.tid = e.pid + uint32_t(rng() % 4);
    e.set_comm(rng() % 2 ? "python3" : "pt_data_worker");
    e.cgroup_id = rng() % 4 ? 0 : 0x1234567890ull;
    e.vendor = op.vendor;
    e.api = op.api;
    e.op = op.op;
    e.kind = op.kind;
    e.has_ret = rng() % 10 != 0;
    e.unfinished = !e.has_ret && rng() % 2;
    if (e.has_ret) e.ret = rng() % 5 ? 0 : -int64_t(rng() % 1000) + 500;
    if (rng() % 3 == 0) {
      e.off_cpu_ns = rng() % 100'000'000;
      e.preempts = uint32_t(rng() % 7);
      e.switches = e.preempts + uint32_t(rng() % 3);
      e.set_peer_comm("hog");
      e.set(Field::kPeerPid, 4411);
    }
    e.stack_id = rng() % 2 ? rng() : 0;
    e.set(Field::kStream, rng() % 2 ? 0 : 0x7f00'0000'0000ull + rng() % 4096);
    if (op.kind == EventKind::kMemcpy) {
      e.set(Field::kBytes, rng() % (1ull << 40));
      e.set(Field::kDirection, rng() % 6);
    }
    if (op.kind == EventKind::kLaunch) {
      e.set(Field::kFunc, rng());
      e.set(Field::kGridX, rng() % 65536);
      e.set(Field::kBlockX, 256);
    }
    if (op.kind == EventKind::kCollective) {
      e.set(Field::kRank, rng() % 8);
      e.set(Field::kNranks, 8);
      e.set(Field::kCommHash, rng());
    }
    out.push_back(e);
  }
  return out;
}

// Writes `calls` to a new trace and opens it for reading.
std::unique_ptr<TraceReader> write_trace(const std::vector<Event>& calls) {
  std::string path = test::temp_path("call-reads.db");
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  SessionInfo si;
  si.mono_offset_ns = kOffset;
  EXPECT_TRUE((*w)->begin_session(si));
  for (const Event& e : calls) EXPECT_TRUE((*w)->add(e));
  EXPECT_TRUE((*w)->finish(SessionEnd{}));
  auto reader = TraceReader::open(path);
  EXPECT_TRUE(reader) << (reader ? "" : reader.error().message);
  return reader ? std::move(*reader) : nullptr;
}

std::vector<std::string> read_all(SqlTraceSource& src, const engine::Window& w) {
  std::vector<std::string> out;
  src.calls(w, [&](const Event& e) { out.push_back(describe(e, 0)); });
  EXPECT_EQ(src.error(), "");
  return out;
}

// The calls of `w` as written, in the file's order (start time, then insertion).
std::vector<std::string> expected(const std::vector<Event>& calls, const engine::Window& w) {
  std::vector<std::string> out;
  for (const Event& e : calls) {
    int64_t ts = int64_t(e.ts_ns) + kOffset;
    if (ts < w.from_ns || ts > w.to_ns || (w.pid && e.pid != *w.pid)) continue;
    out.push_back(describe(e, kOffset));
  }
  return out;
}

TEST(CallReads, EveryMemberOfEveryCallComesBackFromTheFile) {
  auto calls = sample_calls(5000);
  auto reader = write_trace(calls);
  ASSERT_TRUE(reader);
  SqlTraceSource src(*reader);
  src.set_call_cache(0);
  EXPECT_EQ(read_all(src, {}), expected(calls, {}));
  EXPECT_EQ(src.cached_calls(), 0u);
}

TEST(CallReads, LaterPassesComeFromMemoryAndMatchTheFileExactly) {
  auto calls = sample_calls(20000);
  auto reader = write_trace(calls);
  ASSERT_TRUE(reader);
  SqlTraceSource src(*reader);
  engine::Window whole;
  EXPECT_EQ(read_all(src, whole), expected(calls, whole));
  EXPECT_EQ(src.cached_calls(), calls.size());
  // Parts of the window, one process, and the same window again: all from memory.
  engine::Window part;
  part.from_ns = int64_t(calls[5000].ts_ns) + kOffset;
  part.to_ns = int64_t(calls[9000].ts_ns) + kOffset;
  engine::Window one = part;
  one.pid = 101;
  for (const engine::Window* w : {&whole, &part, &one}) {
    auto got = read_all(src, *w);
    EXPECT_FALSE(got.empty());
    EXPECT_EQ(got, expected(calls, *w));
  }
  // A window the copy does not cover replaces it (a merged file is analysed node by node:
  // every pass over the next node read it from the file again), and the part is in it.
  SqlTraceSource first_part(*reader);
  EXPECT_EQ(read_all(first_part, part), expected(calls, part));
  EXPECT_EQ(first_part.cached_calls(), expected(calls, part).size());
  EXPECT_EQ(read_all(first_part, whole), expected(calls, whole));
  EXPECT_EQ(first_part.cached_calls(), calls.size());
  EXPECT_EQ(read_all(first_part, part), expected(calls, part));
  EXPECT_EQ(first_part.cached_calls(), calls.size());
}

TEST(CallReads, AWindowOverTheMemoryLimitIsReadFromTheFileEveryTime) {
  auto calls = sample_calls(20000);
  auto reader = write_trace(calls);
  ASSERT_TRUE(reader);
  SqlTraceSource src(*reader);
  src.set_call_cache(64 << 10);  // 64 KiB: a few thousand calls
  EXPECT_EQ(read_all(src, {}), expected(calls, {}));
  EXPECT_EQ(src.cached_calls(), 0u);
  EXPECT_EQ(read_all(src, {}), expected(calls, {}));
}

TEST(CallReads, TheMemoryLimitFollowsTheMachinesMemory) {
  constexpr uint64_t kG = uint64_t(1) << 30;
  constexpr size_t kMin = SqlTraceSource::kMinCallCacheBytes;
  constexpr size_t kMax = SqlTraceSource::kMaxCallCacheBytes;
  auto share = [&](uint64_t total, uint64_t available) {
    return hal::memory_share({total, available}, kMin, kMax);
  };
  EXPECT_EQ(share(0, 0), kMin);  // /proc/meminfo unreadable
  EXPECT_EQ(share(2 * kG, kG), kMin);
  EXPECT_EQ(share(24 * kG, 23 * kG), 3 * kG);  // an eighth of it
  EXPECT_EQ(share(24 * kG, 4 * kG), kG);       // a quarter of what is free
  EXPECT_EQ(share(1024 * kG, 900 * kG), kMax);
  std::string path = ::testing::TempDir() + "/meminfo";
  {
    std::ofstream f(path);
    f << "MemTotal:       24598712 kB\nMemFree:        21000000 kB\n"
         "MemAvailable:   23097408 kB\nSwapTotal:             0 kB\n";
  }
  hal::MemoryInfo m = hal::read_memory_info(path);
  EXPECT_EQ(m.total, uint64_t(24598712) << 10);
  EXPECT_EQ(m.available, uint64_t(23097408) << 10);
  EXPECT_EQ(hal::read_memory_info(path + ".missing").total, 0u);
  EXPECT_EQ(SqlTraceSource::default_call_cache_bytes(),
            hal::memory_share(hal::read_memory_info(), kMin, kMax));
}

}  // namespace
}  // namespace ingero::store
