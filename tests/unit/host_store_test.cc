// Schema 11's host store (store/host_store.h): host events written once, into blocks of
// columns, and read back through `host_rows` and `events` as the rows they were; a live reader;
// a batch that failed; retention by whole blocks; a damaged block; schema 10 files converted.
#include "store/host_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "store/retention.h"
#include "store/schema.h"
#include "store/table_defs.h"
#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/full_disk.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;
using Rows = std::vector<std::vector<std::string>>;

constexpr int64_t kOffset = 1'000'000'000'000;

// Runs ingero; its exit status in `rc`, what it printed (stdout, then stderr) returned.
std::string ingero(const std::vector<std::string>& args, int* rc) {
  std::vector<std::string> argv{INGERO_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out, err;
  *rc = test::run_command(argv, &out, &err);
  return out + err;
}

// Host event i of a varied stream: each kind of value a host row holds, NULLs included.
Event varied(uint64_t i) {
  Event e;
  e.ts_ns = i * 1000;
  e.pid = uint32_t(100 + i % 3);
  e.tid = e.pid * 10 + uint32_t(i % 2);
  e.set_comm("worker" + std::to_string(i % 5));
  e.vendor = "host";
  e.api = "kernel";
  e.cgroup_id = 1000 + i % 2;
  if (i % 6 == 0) e.stack_id = 0x1234 + i;
  switch (i % 4) {
    case 0:
      e.kind = EventKind::kSchedSwitch;
      e.op = "sched_switch";
      e.dur_ns = 500 + i;
      e.set(Field::kState, i % 3);
      if (i % 8 == 0) {
        e.set(Field::kPeerPid, 999);
        e.set_peer_comm("hog");
      } else {
        e.set(Field::kWakerTid, 7000 + i);
        e.detail = "waker" + std::to_string(i % 7);
      }
      break;
    case 1:
      e.kind = EventKind::kBlockIo;
      e.op = "block_rq_complete";
      e.dur_ns = 20000 + i;
      e.detail = i % 2 ? "WS" : "R";
      e.set(Field::kSector, 1'000'000 + i);
      e.set(Field::kBytes, 4096 * (i % 9));
      break;
    case 2:
      e.kind = EventKind::kTcpRetransmit;
      e.op = "tcp_retransmit_skb";
      e.saddr = "10.0.0.1:5000";
      e.daddr = "10.0.0." + std::to_string(2 + i % 200) + ":29500";
      e.set(Field::kSport, 5000);
      e.set(Field::kDport, 29500);
      e.set(Field::kState, 1);
      break;
    default:
      e.kind = EventKind::kProcessExit;
      e.op = "process_exit";
      e.has_ret = true;
      e.ret = -int64_t(i % 7);
      e.unfinished = i % 5 == 0;
      break;
  }
  return e;
}

// Every stored column of host_rows, as text, in id order.
std::string every_column() {
  std::string cols;
  for (const auto& c : events_def().columns)
    cols += (cols.empty() ? "" : ", ") + ("quote(" + c.name + ")");
  return "SELECT " + cols + ", gpu_id, arg0, arg1 FROM host_rows ORDER BY id";
}

std::unique_ptr<TraceWriter> open_writer(const std::string& path) {
  auto w = TraceWriter::open(path);
  EXPECT_TRUE(w) << (w ? "" : w.error().message);
  if (!w) return nullptr;
  SessionInfo si;
  si.node = "node-a";
  si.mono_offset_ns = kOffset;
  EXPECT_TRUE((*w)->begin_session(si));
  return std::move(*w);
}

// The expected rows of events `from` to `to` (exclusive) as varied() makes them, written with
// ids starting at `first_id`.
Rows expected_rows(uint64_t from, uint64_t to, int64_t first_id, const std::string& path) {
  // The writer's op ids for the four ops: read back from the file.
  std::map<std::string, Rows> op_ids;
  Rows out;
  for (uint64_t i = from; i < to; ++i) {
    Event e = varied(i);
    auto [at, fresh] = op_ids.try_emplace(std::string(e.op));
    if (fresh)
      at->second = test::query_rows(
          path, "SELECT source_id, op_id FROM ops WHERE name = '" + std::string(e.op) + "'");
    const Rows& ids = at->second;
    EXPECT_EQ(ids.size(), 1u) << e.op;
    if (ids.size() != 1) return out;
    auto q = [](const std::string& s) { return "'" + s + "'"; };
    auto num = [](int64_t v) { return std::to_string(v); };
    std::vector<std::string> r = {num(first_id + int64_t(i - from)),
                                  q("node-a"),
                                  "1",
                                  num(kOffset + int64_t(e.ts_ns)),
                                  num(int64_t(e.dur_ns)),
                                  num(e.pid),
                                  num(e.tid),
                                  ids[0][0],
                                  ids[0][1],
                                  e.has_ret ? num(e.ret) : "NULL",
                                  e.unfinished ? "1" : "0",
                                  num(int64_t(e.cgroup_id)),
                                  q(std::string(e.comm_view())),
                                  "NULL",
                                  "NULL",
                                  "NULL",
                                  e.peer_comm[0] ? q(std::string(e.peer_comm_view())) : "NULL",
                                  e.detail.empty() ? "NULL" : q(e.detail),
                                  e.saddr.empty() ? "NULL" : q(e.saddr),
                                  e.daddr.empty() ? "NULL" : q(e.daddr),
                                  num(int64_t(e.stack_id)),
                                  "NULL",
                                  "NULL",
                                  "NULL",
                                  "NULL",
                                  "NULL"};
    for (size_t f = 0; f < hal::kFieldCount; ++f)
      r.push_back(e.has(Field(f)) ? num(int64_t(e.fields[f])) : "NULL");
    r.push_back("0");  // gpu_id
    int64_t arg0 = e.has(Field::kBytes) ? int64_t(e.fields[size_t(Field::kBytes)]) : 0;
    r.push_back(num(arg0));
    r.push_back("0");  // arg1
    out.push_back(std::move(r));
  }
  return out;
}

// 10,000 host events (three blocks of 4,096 and a part) and calls between them: each host row
// reads back exactly as it was given, through the view and through `events`.
TEST(HostStore, EveryHostEventReadsBackAsItWasWritten) {
  std::string path = test::temp_path("host-store.db");
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  for (uint64_t i = 0; i < 10000; ++i) ASSERT_TRUE(w->add(varied(i)));
  ASSERT_TRUE(w->finish(SessionEnd{}));
  w.reset();
  EXPECT_EQ(test::query_rows(path,
                             "SELECT count(*), sum(events), min(first_id), max(last_id) "
                             "FROM host_store"),
            (Rows{{"3", "10000", "1", "10000"}}));
  EXPECT_EQ(test::query_int(path, "PRAGMA user_version"), 11);
  EXPECT_EQ(test::query_int(path,
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                            "name = 'host_rows'"),
            0);
  Rows want = expected_rows(0, 10000, 1, path);
  ASSERT_EQ(want.size(), 10000u);
  EXPECT_EQ(test::query_rows(path, every_column()), want);
  // A constraint on time or id reads the blocks that hold it.
  EXPECT_EQ(test::query_rows(path,
                             "SELECT count(*), min(id), max(id) FROM events WHERE "
                             "timestamp BETWEEN " +
                                 std::to_string(kOffset + 4'000'000) + " AND " +
                                 std::to_string(kOffset + 4'999'000)),
            (Rows{{"1000", "4001", "5000"}}));
  EXPECT_EQ(test::query_int(path,
                            "SELECT count(*) FROM host_events WHERE event = "
                            "'tcp_retransmit_skb' AND daddr = '10.0.0.4:29500'"),
            50);
}

// A reader of a live trace sees the host events of the last commit, the block filling included;
// the filling block is rewritten in place, not added again.
TEST(HostStore, ALiveReaderSeesTheFillingBlockAsOfTheLastCommit) {
  std::string path = test::temp_path("host-live.db");
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  for (uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(w->add(varied(i)));
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_rows"), 10);
  for (uint64_t i = 10; i < 15; ++i) ASSERT_TRUE(w->add(varied(i)));
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_rows"), 10);
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(test::query_rows(path, "SELECT count(*), max(events) FROM host_store"),
            (Rows{{"1", "15"}}));
  EXPECT_EQ(test::query_rows(path, every_column()), expected_rows(0, 15, 1, path));
}

// A batch whose COMMIT fails (a full disk) takes back the host events it added, and counts
// them as lost; the next batch goes on from what the file holds.
TEST(HostStore, AFailedBatchTakesBackItsHostEventsAndCountsThem) {
  std::string path = test::temp_path("host-failed.db");
  test::FullDisk disk;
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  for (uint64_t i = 0; i < 3000; ++i) ASSERT_TRUE(w->add(varied(i)));
  ASSERT_TRUE(w->commit());
  // 3,000 more: the block fills (4,096) and another starts; then the COMMIT fails.
  for (uint64_t i = 3000; i < 6000; ++i) ASSERT_TRUE(w->add(varied(i)));
  test::FullDisk::failing_writes = 1;
  EXPECT_FALSE(w->commit());
  EXPECT_EQ(w->failed(), 3000u);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_rows"), 3000);
  // The next batch: 100 more, their ids after those the file holds (the lost ones were never
  // in it).
  for (uint64_t i = 6000; i < 6100; ++i) ASSERT_TRUE(w->add(varied(i)));
  ASSERT_TRUE(w->commit());
  ASSERT_TRUE(w->finish(SessionEnd{}));
  w.reset();
  Rows want = expected_rows(0, 3000, 1, path);
  Rows more = expected_rows(6000, 6100, 3001, path);
  want.insert(want.end(), more.begin(), more.end());
  EXPECT_EQ(test::query_rows(path, every_column()), want);
  EXPECT_EQ(test::query_rows(path, "SELECT count(*), sum(events) FROM host_store"),
            (Rows{{"1", "3100"}}));
}

// Retention deletes host events by whole blocks, as it does calls: a block whose events all
// ended before the cut goes, the newest stays; each is counted, and those the shipper had not
// read are counted as unshipped.
TEST(HostStore, RetentionDeletesWholeBlocksOfHostEventsAndCountsThem) {
  std::string path = test::temp_path("host-retention.db");
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  // One host event a millisecond for 60 s: 15 blocks, the 13th from 49.152 s.
  for (uint64_t i = 0; i < 60000; ++i) {
    Event e = varied(i);
    e.ts_ns = i * 1'000'000;
    e.dur_ns = 1000;
    ASSERT_TRUE(w->add(e));
  }
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_store"), 15);
  RetentionPolicy age{10'000'000'000, 0, {{"events", 30000}}};
  int64_t now = kOffset + 60'000'000'000;
  auto p = w->apply_retention(age, now);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->host_events, 12u * 4096);
  EXPECT_EQ(p->calls, 0u);
  EXPECT_EQ(p->unshipped, 12u * 4096 - 30000);
  EXPECT_EQ(p->first_ts, kOffset);
  EXPECT_EQ(test::query_rows(path, "SELECT count(*), min(id), max(id) FROM host_rows"),
            (Rows{{"10848", "49153", "60000"}}));
  EXPECT_EQ(test::query_rows(path, "SELECT calls, events FROM retention_state"),
            (Rows{{"0", "49152"}}));
  // Everything past the policy: the newest block stays, and ids go on after it.
  RetentionPolicy all{1'000'000'000, 0, {}};
  while (true) {
    auto q = w->apply_retention(all, kOffset + 120'000'000'000);
    ASSERT_TRUE(q) << q.error().message;
    if (!q->deleted) break;
  }
  EXPECT_EQ(test::query_rows(path, "SELECT count(*), min(id), max(id) FROM host_rows"),
            (Rows{{"2656", "57345", "60000"}}));
  ASSERT_TRUE(w->add(varied(60000)));
  ASSERT_TRUE(w->commit());
  EXPECT_EQ(test::query_int(path, "SELECT max(id) FROM host_rows"), 60001);
}

// Over a size limit, host blocks go oldest first with the calls' blocks.
TEST(HostStore, RetentionBySizeDeletesTheOldestHostBlocks) {
  std::string path = test::temp_path("host-retention-size.db");
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  // Stacks and durations that vary as real ones do, so that the blocks do not compress to
  // nothing.
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i < 60000; ++i) {
    Event e = varied(i);
    e.ts_ns = i * 1'000'000;
    e.dur_ns = 1000 + rng() % 99000;
    e.stack_id = rng();
    ASSERT_TRUE(w->add(e));
  }
  ASSERT_TRUE(w->commit());
  auto used = used_bytes(w->db());
  ASSERT_TRUE(used);
  // Half of the data over the pages of an empty trace, which no policy goes under.
  uint64_t floor = 0;
  {
    auto empty = open_writer(test::temp_path("host-retention-empty.db"));
    ASSERT_TRUE(empty);
    ASSERT_TRUE(empty->commit());
    auto b = used_bytes(empty->db());
    ASSERT_TRUE(b);
    floor = *b;
  }
  ASSERT_GT(*used, floor + 8 * 16384) << "60,000 host events fill at least 8 pages";
  RetentionPolicy size{0, floor + (*used - floor) / 2, {}};
  for (int i = 0; i < 20; ++i) {
    auto p = w->apply_retention(size, kOffset + 60'000'000'000);
    ASSERT_TRUE(p) << p.error().message;
    if (p->used_bytes + wal_bytes(path) <= size.max_bytes) break;
  }
  auto after = used_bytes(w->db());
  ASSERT_TRUE(after);
  EXPECT_LE(*after + wal_bytes(path), size.max_bytes);
  int64_t left = test::query_int(path, "SELECT count(*) FROM host_store");
  EXPECT_GE(left, 1);
  EXPECT_LT(left, 15);
  // The oldest went: what is left is the newest events, to the last.
  EXPECT_EQ(test::query_int(path, "SELECT max(id) FROM host_rows"), 60000);
  EXPECT_EQ(test::query_int(path, "SELECT count(*) FROM host_rows"),
            60000 - test::query_int(path, "SELECT min(id) FROM host_rows") + 1);
}

// A block of host events that does not decode is an error naming it, never a short answer.
TEST(HostStore, ADamagedBlockIsAnErrorNamingIt) {
  std::string path = test::temp_path("host-damaged.db");
  auto w = open_writer(path);
  ASSERT_TRUE(w);
  for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(w->add(varied(i)));
  ASSERT_TRUE(w->finish(SessionEnd{}));
  w.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE host_store SET data = substr(data, 1, 40) || x'00' || "
                         "substr(data, 42) WHERE id = 2",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  int rc = 0;
  std::string out = ingero({"query", path, "SELECT count(*) FROM host_rows"}, &rc);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(path + ": host block 2: damaged"), std::string::npos) << out;
  // The engine reads the blocks themselves, not the view: the same error, never a short answer.
  out = ingero({"explain", "--db", path}, &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(path + ": host block 2: damaged archive block: it does not decompress"),
            std::string::npos)
      << out;
  // The first block reads as it was.
  out = ingero({"query", path,
                "SELECT count(*) FROM host_rows WHERE id "
                "<= 4096"},
               &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("4096"), std::string::npos) << out;
}

// Schema 10 as its writer left it: host_rows a table (made here from a file of schema 11 by
// SQL, with every kind of value), converted in place by the next writer: every row, every
// column, the same; then the writer goes on after the greatest id.
TEST(HostStore, AWriterConvertsASchema10FileKeepingEveryHostRow) {
  std::string path = test::temp_path("host-convert.db");
  {
    auto w = open_writer(path);
    ASSERT_TRUE(w);
    for (uint64_t i = 0; i < 5000; ++i) ASSERT_TRUE(w->add(varied(i)));
    ASSERT_TRUE(w->finish(SessionEnd{}));
  }
  Rows want = expected_rows(0, 5000, 1, path);
  {
    auto db = Db::open(path, Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    std::string cols;
    for (const auto& c : events_def().columns) cols += (cols.empty() ? "" : ", ") + c.name;
    ASSERT_TRUE((*db)->exec("BEGIN;\nCREATE TABLE old_rows AS SELECT " + cols +
                            " FROM host_rows;\nDROP VIEW host_rows;\nDROP TABLE host_store;\n" +
                            events_ddl("host_rows") +
                            "CREATE INDEX idx_host_rows_ts ON host_rows(timestamp);\n"
                            "INSERT INTO host_rows (" +
                            cols + ") SELECT " + cols +
                            " FROM old_rows;\nDROP TABLE old_rows;\nPRAGMA user_version = 10;\n"
                            "COMMIT;"));
  }
  EXPECT_EQ(test::query_rows(path, every_column()), want);  // read as it is
  {
    auto w = TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
    SessionInfo si;
    si.node = "node-a";
    si.mono_offset_ns = kOffset;
    ASSERT_TRUE((*w)->begin_session(si));
    ASSERT_TRUE((*w)->add(varied(5000)));
    ASSERT_TRUE((*w)->finish(SessionEnd{}));
  }
  EXPECT_EQ(test::query_int(path, "PRAGMA user_version"), 11);
  EXPECT_EQ(test::query_rows(path, "SELECT count(*), sum(events) FROM host_store"),
            (Rows{{"3", "5001"}}));
  Rows now = test::query_rows(path, every_column());
  ASSERT_EQ(now.size(), 5001u);
  EXPECT_EQ(Rows(now.begin(), now.begin() + 5000), want);
  EXPECT_EQ(now.back()[0], "5001");
}

// A file the previous build wrote (schema 10: bench/trace_gen, kept in tests/fixtures): the
// conversion keeps every row of `events`, and explain's answer word for word.
TEST(HostStore, ASchema10FileFromThePreviousBuildConvertsWithTheSameAnswer) {
  std::string dir = test::temp_path("schema10");
  std::filesystem::create_directories(dir);
  std::string path = dir + "/trace.db";
  ASSERT_TRUE(test::unpack_fixture("schema10/trace_gen", path));
  ASSERT_EQ(test::query_int(path, "PRAGMA user_version"), 10);
  const std::string all = "SELECT * FROM events ORDER BY id";
  Rows events = test::query_rows(path, all);
  ASSERT_EQ(events.size(), 29082u);
  int rc = 0;
  std::string before = ingero({"explain", "--db", path}, &rc);
  ASSERT_EQ(rc, 0) << before;
  std::string out = ingero({"compact", path}, &rc);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(
      out.rfind("ingero compact: converted to schema 11 (its 358 host events into blocks); ", 0),
      0u)
      << out;
  EXPECT_EQ(test::query_int(path, "PRAGMA user_version"), 11);
  EXPECT_EQ(test::query_int(path, "SELECT sum(events) FROM host_store"), 358);
  EXPECT_EQ(test::query_rows(path, all), events);
  EXPECT_EQ(ingero({"explain", "--db", path}, &rc), before);
}

}  // namespace
}  // namespace ingero::store
