// For tests of reads of a file while it is written: events whose ids interleave as a tracer's
// do (calls and host events share one id space), and a commit made exactly between two
// statements of a read, from the writer's own connection, as the reader's statement of
// interest starts (a trace callback on the reader's connection).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "store/trace_writer.h"

namespace ingero::test {

// Events `from` to `to`, 1 ms apart on one thread: two launches, then a host event (a switch).
inline void add_interleaved_events(store::TraceWriter& w, int from, int to) {
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

// Runs `commit` once, as the first statement on `db` whose SQL holds `match` starts; counts
// every such start.
class CommitAt {
 public:
  CommitAt(sqlite3* db, std::string match, std::function<void()> commit)
      : db_(db), match_(std::move(match)), commit_(std::move(commit)) {
    sqlite3_trace_v2(db_, SQLITE_TRACE_STMT, &CommitAt::on_stmt, this);
  }
  ~CommitAt() { sqlite3_trace_v2(db_, 0, nullptr, nullptr); }
  CommitAt(const CommitAt&) = delete;
  CommitAt& operator=(const CommitAt&) = delete;
  int starts() const { return starts_; }

 private:
  static int on_stmt(unsigned, void* ctx, void* stmt, void*) {
    auto* self = static_cast<CommitAt*>(ctx);
    const char* sql = sqlite3_sql(static_cast<sqlite3_stmt*>(stmt));
    if (sql && std::strstr(sql, self->match_.c_str()) && self->starts_++ == 0) self->commit_();
    return 0;
  }
  sqlite3* db_;
  std::string match_;
  std::function<void()> commit_;
  int starts_ = 0;
};

}  // namespace ingero::test
