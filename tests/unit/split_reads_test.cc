// A large window's first read is split in two by time (SqlTraceSource::set_split_reads): the
// later part is read on a second connection, on another thread. Every call and run must come
// once, in order, as one read gives them, whatever falls on the cut, whatever fits the cache,
// and whatever is folded meanwhile. Host events read straight from the events table must be
// what the host_events view gives.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <random>
#include <sstream>
#include <utility>

#include "store/event_rows.h"
#include "store/tiers.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::store {
namespace {

using namespace tiers_fixture;
using tiers_fixture::describe;  // beside this file's own overload

std::string describe(const engine::CallRun& r) {
  std::ostringstream o;
  o << "run " << r.ts_ns << ' ' << r.span_ns << ' ' << r.pid << ' ' << r.tid << ' ' << r.op << ' '
    << r.calls << ' ' << r.sum_ns << ' ' << r.min_ns << ' ' << r.max_ns << ' ' << r.stack_id;
  return o.str();
}

// Two threads launching every `every_us` for `seconds` (durations spread so that ~6% keep
// their rows and the rest fold into runs of ~20), a sync every 100 launches: runs straddle
// every second, where reads are cut.
std::string busy_trace(const std::string& name, double seconds, uint64_t every_us = 30) {
  std::mt19937_64 rng(5);
  std::vector<Event> calls;
  for (uint64_t t = 1000; t < uint64_t(seconds * 1e9); t += every_us * kUs) {
    Event e = launch(t, 2 * kUs + rng() % (8 * kUs));
    calls.push_back(e);
    Event twin = launch(t + 11 * kUs, 2 * kUs + rng() % (8 * kUs), 11);
    calls.push_back(twin);
    if (calls.size() % 200 == 0)
      calls.push_back(
          call(t + 25 * kUs, 2 * kUs, "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync));
  }
  return write_trace(name, calls);
}

struct Items {
  std::vector<std::string> calls;  // calls(): runs expanded
  std::vector<std::string> items;  // call_runs(): calls and whole runs, as given
};

Items read(SqlTraceSource& src, const engine::Window& w) {
  Items out;
  src.call_runs(
      w, [&](const Event& e) { out.items.push_back(describe(e)); },
      [&](const engine::CallRun& r) { out.items.push_back(describe(r)); });
  src.calls(w, [&](const Event& e) { out.calls.push_back(describe(e)); });
  EXPECT_EQ(src.error(), "");
  return out;
}

struct Folded {
  std::string path;
  std::unique_ptr<TraceReader> reader;
};

Folded folded_busy(const std::string& name, double seconds = 2.5, uint64_t every_us = 30) {
  Folded f;
  f.path = copy_of(busy_trace(name + "-full.db", seconds, every_us), name + ".db");
  FoldCount c = fold_everything(f.path);
  EXPECT_GT(c.runs, 3000u);
  auto reader = TraceReader::open(f.path, app::builtin_views());
  EXPECT_TRUE(reader);
  f.reader = std::move(*reader);
  return f;
}

TEST(SplitReads, EveryCallAndRunComesOnceInOrderFromBothParts) {
  Folded f = folded_busy("split-runs", 16, 150);
  SqlTraceSource one(*f.reader);
  one.set_split_reads(0);
  Items want = read(one, {});
  EXPECT_TRUE(one.last_slices().empty());
  ASSERT_GT(want.calls.size(), 200000u);

  SqlTraceSource two(*f.reader);
  two.set_split_reads(1000);
  Items first = read(two, {});  // fills the cache from two connections
  const std::vector<int64_t>& cuts = two.last_slices();
  ASSERT_EQ(cuts.size(), 16u);  // at every second: slices of ~500 rows and runs or more
  // Runs straddle the cuts: the slice they start in gives them whole.
  for (size_t i = 1; i < cuts.size(); ++i)
    EXPECT_GE(test::query_int(f.path, "SELECT count(*) FROM call_runs WHERE timestamp < " +
                                          std::to_string(cuts[i]) +
                                          " AND timestamp + span_ns >= " + std::to_string(cuts[i])),
              1)
        << cuts[i];
  int64_t cut = cuts[1];
  EXPECT_EQ(first.items, want.items);
  EXPECT_EQ(first.calls, want.calls);
  EXPECT_EQ(two.cached_calls(), one.cached_calls());
  EXPECT_EQ(read(two, {}).items, want.items);  // from memory
  // Parts of the window and one thread's process, from memory, as from one read.
  engine::Window part;
  part.from_ns = cut - 300000000;
  part.to_ns = cut + 200000000;
  part.pid = 10;
  SqlTraceSource part_one(*f.reader);
  part_one.set_call_cache(0);
  Items want_part = read(part_one, part);
  ASSERT_FALSE(want_part.items.empty());
  Items got_part = read(two, part);
  EXPECT_EQ(got_part.items, want_part.items);
  EXPECT_EQ(got_part.calls, want_part.calls);
}

// when_calls_held: once both connections' parts are in memory, before this thread has passed
// the second's on, other threads may read the window, and they read what one read gives. Where
// a part does not fit, nothing is held.
TEST(SplitReads, CallsHeldAreReadBesideTheReadThatPassesThemOn) {
  Folded f = folded_busy("split-held", 16, 150);
  SqlTraceSource one(*f.reader);
  one.set_split_reads(0);
  Items want = read(one, {});

  SqlTraceSource two(*f.reader);
  two.set_split_reads(1000);
  std::vector<std::string> items;
  std::map<uint32_t, uint64_t> held;
  size_t passed_when_held = 0;
  int calls_of_fn = 0;
  std::future<Items> beside;
  two.when_calls_held({}, [&](const std::map<uint32_t, uint64_t>& per_pid) {
    ++calls_of_fn;
    held = per_pid;
    passed_when_held = items.size();
    beside = std::async(std::launch::async, [&] { return read(two, {}); });
  });
  two.call_runs(
      {}, [&](const Event& e) { items.push_back(describe(e)); },
      [&](const engine::CallRun& r) { items.push_back(describe(r)); });
  ASSERT_TRUE(beside.valid());
  Items other = beside.get();
  EXPECT_EQ(two.error(), "");
  EXPECT_EQ(items, want.items);
  EXPECT_EQ(other.items, want.items);
  EXPECT_EQ(other.calls, want.calls);
  // Held part-way through this read's pass: after its own slices, before the other's.
  EXPECT_GT(passed_when_held, 0u);
  EXPECT_LT(passed_when_held, want.items.size());
  // Every call of the one process (two threads), runs' calls included.
  EXPECT_EQ(held, (std::map<uint32_t, uint64_t>{{10, want.calls.size()}}));
  // Once: a later first read (of another window) does not call it again.
  engine::Window part;
  part.from_ns = kOffset + 300000000;
  part.to_ns = kOffset + 2200000000;
  (void)read(two, part);
  EXPECT_EQ(calls_of_fn, 1);

  SqlTraceSource small(*f.reader);
  small.set_split_reads(1000);
  small.set_call_cache(1 << 20);  // no part fits
  bool called = false;
  small.when_calls_held({}, [&](const std::map<uint32_t, uint64_t>&) { called = true; });
  EXPECT_EQ(read(small, {}).items, want.items);
  EXPECT_GE(small.last_slices().size(), 2u);
  EXPECT_FALSE(called);
}

// The second connection may take every slice before the first takes one (a loaded machine):
// then none is left, not slice 2^64 - 1 (which read past the parts and crashed).
TEST(SplitReads, ASliceQueueEmptiedFromTheEndHasNothingLeft) {
  SliceQueue q;
  q.reset(3);
  std::vector<size_t> got;
  while (auto i = q.take(false)) got.push_back(*i);
  EXPECT_EQ(got, (std::vector<size_t>{2, 1, 0}));
  EXPECT_EQ(q.take(false), std::nullopt);
  EXPECT_EQ(q.take(true), std::nullopt);
  // From both ends, each once.
  q.reset(4);
  std::vector<size_t> both{*q.take(true), *q.take(false), *q.take(true), *q.take(false)};
  EXPECT_EQ(both, (std::vector<size_t>{0, 3, 1, 2}));
  EXPECT_EQ(q.take(true), std::nullopt);
  EXPECT_EQ(q.take(false), std::nullopt);
}

TEST(SplitReads, AWindowsFirstReadIsSplitInsideTheWindow) {
  Folded f = folded_busy("split-window");
  engine::Window w;
  w.from_ns = kOffset + 300000000;
  w.to_ns = kOffset + 2200000000;
  SqlTraceSource one(*f.reader);
  one.set_split_reads(0);
  SqlTraceSource two(*f.reader);
  two.set_split_reads(1000);
  Items want = read(one, w), got = read(two, w);
  ASSERT_GE(two.last_slices().size(), 2u);
  EXPECT_EQ(two.last_slices().front(), w.from_ns);
  EXPECT_GT(two.last_slices()[1], w.from_ns);
  EXPECT_LE(two.last_slices().back(), w.to_ns);
  EXPECT_EQ(got.items, want.items);
  EXPECT_EQ(got.calls, want.calls);
}

TEST(SplitReads, PartsThatDoNotFitTheCacheAreReadFromTheFileEveryTime) {
  Folded f = folded_busy("split-small");
  SqlTraceSource one(*f.reader);
  one.set_split_reads(0);
  Items want = read(one, {});
  // Half of 1 MiB a part: neither holds one 4 MiB chunk. The later part, read on the second
  // connection, is then read again on the first, in its snapshot.
  SqlTraceSource two(*f.reader);
  two.set_split_reads(1000);
  two.set_call_cache(1 << 20);
  Items got = read(two, {});
  EXPECT_GE(two.last_slices().size(), 2u);
  EXPECT_EQ(got.items, want.items);
  EXPECT_EQ(got.calls, want.calls);
  EXPECT_EQ(two.cached_calls(), 0u);
  EXPECT_EQ(read(two, {}).items, want.items);
}

// A fold committed after the first connection's snapshot began: the second connection would
// see those calls in runs that the first still sees as rows. The read is not split then.
TEST(SplitReads, AFoldBetweenTheTwoSnapshotsIsNotSplit) {
  std::string path = busy_trace("split-fold.db", 2.5);
  // As while it is traced: in WAL mode, a fold commits beside readers' snapshots (in rollback
  // mode it waits until the first connection's read ends).
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("PRAGMA journal_mode = WAL"));
  }
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  std::vector<std::string> before;
  {
    SqlTraceSource one(**reader);
    one.set_split_reads(0);
    before = read(one, {}).calls;
  }
  SqlTraceSource two(**reader);
  two.set_split_reads(1000);
  uint64_t folded = 0;
  bool once = false;
  two.set_between_snapshots([&] {
    if (std::exchange(once, true)) return;
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    auto pass = fold_unfolded(**db);  // as `compact` folds a --keep-all trace
    ASSERT_TRUE(pass) << pass.error().message;
    folded = *pass;
  });
  std::vector<std::string> got;
  two.calls({}, [&](const Event& e) { got.push_back(describe(e)); });
  EXPECT_EQ(two.error(), "");
  EXPECT_GT(folded, 30u);  // blocks
  EXPECT_TRUE(two.last_slices().empty());
  EXPECT_EQ(got, before);  // the first snapshot's calls, each once
  // Read again, split: the folded blocks (their rows still there for SQL) read as one read of
  // them does.
  SqlTraceSource three(**reader);
  three.set_split_reads(0);
  Items whole = read(three, {});
  SqlTraceSource four(**reader);
  four.set_split_reads(1000);
  Items split = read(four, {});
  EXPECT_GE(four.last_slices().size(), 2u);
  EXPECT_EQ(split.items, whole.items);
  EXPECT_EQ(split.calls, whole.calls);
}

// What a host event reads as, straight from the table and through the view, along the time
// index and by a scan of the table.
std::vector<std::string> host_rows(Db& db, bool direct, bool scan, int64_t from = INT64_MIN,
                                   int64_t to = INT64_MAX, bool* from_blocks = nullptr) {
  StringPool strings;
  EventFilter f;
  f.scan = scan;
  f.from_ns = from;
  f.to_ns = to;
  auto c = EventCursor::open(db, EventCursor::Rows::kHostEvents, f, strings, direct);
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  if (from_blocks && c) *from_blocks = (*c)->from_blocks();
  std::vector<std::string> out;
  Event e;
  while (true) {
    auto more = (*c)->next(e);
    EXPECT_TRUE(more);
    if (!more || !*more) break;
    out.push_back(describe(e));
  }
  return out;
}

// On-CPU samples are host events: a direct read of host events brings them along, and the
// cpu_samples() after it gives, for any window inside the one read, exactly what a read of its
// own gives (every process's samples of the window, their stacks, in (time, id) order).
TEST(SplitReads, OnCpuSamplesBroughtByTheHostReadAreWhatTheirOwnReadGives) {
  std::vector<Event> events = training_loop(30).calls;  // pid 10's samples, one stack
  for (uint64_t i = 0; i < 50; ++i) {  // another process's, on other stacks, some at equal times
    Event e = host_event(events[i * 37].ts_ns, "cpu_sample", EventKind::kCpuSample);
    e.pid = e.tid = 11;
    e.stack_id = 0x5000 + i % 7;
    events.push_back(e);
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  std::string path = write_trace("samples-ahead.db", events);
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  using Row = std::tuple<int64_t, uint32_t, uint32_t, uint64_t>;
  auto samples = [](SqlTraceSource& s, const engine::Window& w) {
    std::vector<Row> v;
    s.cpu_samples(w, [&](const engine::CpuSample& c) {
      v.push_back({c.ts_ns, c.pid, c.tid, c.stack_id});
    });
    return v;
  };
  engine::Window all, part, one;
  SqlTraceSource probe(**reader);
  auto span = probe.time_span();
  part.from_ns = span.first + (span.second - span.first) / 3;
  part.to_ns = span.second - (span.second - span.first) / 3;
  one = part;
  one.pid = 11;
  size_t pid11 = 0;
  for (const engine::Window& w : {all, part, one}) {
    SqlTraceSource alone(**reader);
    std::vector<Row> expected = samples(alone, w);
    SqlTraceSource s(**reader);
    s.host_events(all, [](const hal::Event&) {});
    EXPECT_EQ(samples(s, w), expected);
    EXPECT_EQ(samples(s, w), expected);  // taken once; then read from the table
    EXPECT_TRUE(s.error().empty()) << s.error();
    if (w.pid) pid11 = expected.size();
  }
  EXPECT_GT(pid11, 5u);
  EXPECT_LT(pid11, 50u);
  // A window the host read did not cover is read from the table.
  SqlTraceSource alone(**reader), s(**reader);
  s.host_events(part, [](const hal::Event&) {});
  EXPECT_EQ(samples(s, all), samples(alone, all));
  EXPECT_EQ(samples(alone, all).size(), 30u * 8 + 50);
}

TEST(SplitReads, HostEventsReadDirectlyAreWhatTheViewGives) {
  std::vector<Event> events = training_loop(30).calls;  // switches and on-CPU samples
  uint64_t t = 500 * kMs;
  auto add = [&](const char* op, EventKind kind) -> Event& {
    events.push_back(host_event(t += kMs, op, kind));
    return events.back();
  };
  add("sched_wakeup", EventKind::kSchedWakeup).set(Field::kCpu, 3);
  Event& fork = add("process_fork", EventKind::kProcessFork);
  fork.set(Field::kPeerPid, 77);
  fork.set_peer_comm("pt_data_worker");
  add("process_exec", EventKind::kProcessExec).detail = "/usr/bin/python3";
  add("process_exit", EventKind::kProcessExit).ret = 0;
  Event& pages = add("page_alloc", EventKind::kPageAlloc);
  pages.set(Field::kCount, 512);
  pages.set(Field::kBytes, 2 << 20);
  Event& io = add("block_read", EventKind::kBlockIo);
  io.dur_ns = 3 * kMs;
  io.set(Field::kDevice, 259);
  io.set(Field::kSector, 123456789);
  io.set(Field::kBytes, 1 << 20);
  io.detail = "R";
  Event& tcp = add("tcp_retransmit", EventKind::kTcpRetransmit);
  tcp.saddr = "10.0.0.1";
  tcp.daddr = "10.0.0.2";
  tcp.set(Field::kSport, 40000);
  tcp.set(Field::kDport, 29500);
  Event& oom = add("oom_kill", EventKind::kOomKill);
  oom.cgroup_id = 0xabc;
  oom.set(Field::kPeerPid, 10);
  oom.set_peer_comm("python3");
  // Equal start times: the order written is kept either way.
  for (int i = 0; i < 3; ++i) add("sched_wakeup", EventKind::kSchedWakeup).ts_ns = t;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  std::string path = write_trace("host-direct.db", events);
  auto db = Db::open(path, Db::Mode::kReadOnly);
  ASSERT_TRUE(db);
  std::vector<std::string> view = host_rows(**db, false, false);
  ASSERT_EQ(view.size(), 30u * 9 + 11);  // a switch and 8 samples a step, and the 11 added
  for (const char* op : {"process_fork", "block_read", "tcp_retransmit", "oom_kill"})
    EXPECT_EQ(std::count_if(view.begin(), view.end(),
                            [&](const std::string& s) { return s.find(op) != s.npos; }),
              1)
        << op;
  EXPECT_EQ(host_rows(**db, true, false), view);
  EXPECT_EQ(host_rows(**db, true, true), view);
}

// Schema 11 keeps host events in blocks of 4,096 (store/host_store.h), which the direct read
// takes straight from the blocks: across blocks whose times overlap (events reach the writer
// nearly, not exactly, in time order), and for a window that begins and ends inside blocks, it
// reads exactly what the view gives, in (time, id) order.
TEST(SplitReads, HostEventsReadFromOverlappingBlocksAreWhatTheViewGives) {
  std::mt19937_64 rng(11);
  std::vector<Event> events;
  for (uint64_t i = 0; i < 10'000; ++i) {
    // Late by up to 300 us; every 100th at the very time of the one before it.
    uint64_t ts = 1'000'000 + i * 10 * kUs - (i % 100 ? rng() % (300 * kUs) : 0);
    if (i % 100 == 0 && !events.empty()) ts = events.back().ts_ns;
    Event e = i % 5 == 0 ? host_event(ts, "cpu_sample", EventKind::kCpuSample)
                         : switch_out(ts, 5 * kUs + i % 13, i % 3 == 0);
    e.tid = 10 + uint32_t(i % 4);
    e.stack_id = i % 5 == 0 ? 0x7000 + i % 9 : 0;
    if (i % 250 == 0) e.detail = "d" + std::to_string(i);
    events.push_back(e);
  }
  std::string path = write_trace("host-blocks.db", events);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_store"), 3);
  EXPECT_GT(test::query_int(path,
                            "SELECT count(*) FROM host_store a JOIN host_store b ON "
                            "a.id < b.id AND b.first_ts < a.last_ts"),
            0);  // the blocks' times overlap
  auto db = Db::open(path, Db::Mode::kReadOnly);
  ASSERT_TRUE(db);
  std::vector<std::string> view = host_rows(**db, false, false);
  ASSERT_EQ(view.size(), 10'000u);
  bool from_blocks = false;
  EXPECT_EQ(host_rows(**db, true, false, INT64_MIN, INT64_MAX, &from_blocks), view);
  EXPECT_TRUE(from_blocks);  // not SQL rows of the view
  EXPECT_EQ(host_rows(**db, true, true), view);
  // Stored times are wall-clock: the window is taken from the file's own.
  int64_t first = test::query_int(path, "SELECT min(timestamp) FROM host_rows");
  int64_t from = first + 4'000 * 10 * int64_t(kUs), to = from + 5'000 * 10 * int64_t(kUs);
  std::vector<std::string> part = host_rows(**db, false, false, from, to);
  EXPECT_GT(part.size(), 4'900u);
  EXPECT_LT(part.size(), 5'100u);
  EXPECT_EQ(host_rows(**db, true, false, from, to), part);
  // The on-CPU samples the host read brings along carry their own stacks.
  auto reader = TraceReader::open(path, app::builtin_views());
  ASSERT_TRUE(reader);
  SqlTraceSource s(**reader);
  s.host_events({}, [](const hal::Event&) {});
  std::map<uint64_t, int> stacks;
  s.cpu_samples({}, [&](const engine::CpuSample& c) { ++stacks[c.stack_id]; });
  EXPECT_TRUE(s.error().empty()) << s.error();
  ASSERT_EQ(stacks.size(), 9u);
  EXPECT_EQ(stacks.begin()->first, 0x7000u);
  EXPECT_EQ(stacks[0x7000], 223);  // i % 5 == 0 and i % 9 == 0: every 45th of 10,000
}

}  // namespace
}  // namespace ingero::store
