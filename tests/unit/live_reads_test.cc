// Reads of a file while the tracer writes it: each read is made of several statements (a block
// list, then each block; the op names, then the blocks), and a commit that lands between two of
// them must not make the file read as damaged, nor lose or double what it holds. The commit
// lands exactly there: a trace callback on the reader's connection makes it, from the writer's
// own connection, as the reader's statement of interest starts.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstring>
#include <functional>

#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

// Two calls then a host event, 1 ms apart, from event `from` to `to`.
void add_events(TraceWriter& w, int from, int to) {
  for (int i = from; i < to; ++i) {
    hal::Event e;
    e.ts_ns = uint64_t(i) * 1'000'000;
    e.pid = 7000;
    e.tid = 7001;
    e.set_comm("python3");
    if (i % 3 == 2) {
      e.vendor = "host";
      e.api = "kernel";
      e.op = "sched_switch";
      e.kind = hal::EventKind::kSchedSwitch;
      e.dur_ns = 2000;
    } else {
      e.vendor = "nvidia";
      e.api = "cuda_runtime";
      e.op = "cudaLaunchKernel";
      e.kind = hal::EventKind::kLaunch;
    }
    ASSERT_TRUE(w.add(e));
  }
}

// Runs `commit` once, as the first statement on `db` whose SQL holds `match` starts.
class CommitAt {
 public:
  CommitAt(sqlite3* db, const char* match, std::function<void()> commit)
      : db_(db), match_(match), commit_(std::move(commit)) {
    sqlite3_trace_v2(db_, SQLITE_TRACE_STMT, &CommitAt::on_stmt, this);
  }
  ~CommitAt() { sqlite3_trace_v2(db_, 0, nullptr, nullptr); }
  bool fired() const { return fired_; }

 private:
  static int on_stmt(unsigned, void* ctx, void* stmt, void*) {
    auto* self = static_cast<CommitAt*>(ctx);
    const char* sql = sqlite3_sql(static_cast<sqlite3_stmt*>(stmt));
    if (!self->fired_ && sql && std::strstr(sql, self->match_)) {
      self->fired_ = true;
      self->commit_();
    }
    return 0;
  }
  sqlite3* db_;
  const char* match_;
  std::function<void()> commit_;
  bool fired_ = false;
};

// The filling host block is rewritten whole at each commit. Listed with 10 events, loaded after
// a commit with 20, it read as damaged ("host block 1 holds 20 rows where its entry says 10"):
// explain, export and report of a live trace failed so in a third of tries at 20,000 events a
// second. The read now sees the file as of one commit: its 10 host events, no error.
TEST(LiveReads, AHostBlockRewrittenBetweenItsListingAndItsLoadIsNotDamaged) {
  std::string path = test::temp_path("live_host.db");
  auto w = TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  SessionInfo si;
  si.node = "node-l";
  si.started_at_ns = 1'775'000'000'000'000'000;
  si.mono_offset_ns = si.started_at_ns;
  ASSERT_TRUE((*w)->begin_session(si));
  add_events(**w, 0, 30);
  ASSERT_TRUE((*w)->commit_all());
  auto r = TraceReader::open(path);
  ASSERT_TRUE(r) << r.error().message;
  SqlTraceSource src(**r);
  size_t host = 0;
  {
    CommitAt at((*r)->db().handle(), "SELECT data FROM main.host_store WHERE id", [&] {
      add_events(**w, 30, 60);
      ASSERT_TRUE((*w)->commit_all());
    });
    src.host_events(engine::Window{}, [&](const hal::Event& e) {
      EXPECT_EQ(e.op, "sched_switch");
      ++host;
    });
    EXPECT_TRUE(at.fired());
  }
  EXPECT_EQ(src.error(), "");
  EXPECT_EQ(host, 10u);
  // The next read sees the commit.
  SqlTraceSource again(**r);
  host = 0;
  again.host_events(engine::Window{}, [&](const hal::Event&) { ++host; });
  EXPECT_EQ(again.error(), "");
  EXPECT_EQ(host, 20u);
  ASSERT_TRUE((*w)->finish({}));
}

}  // namespace
}  // namespace ingero::store
