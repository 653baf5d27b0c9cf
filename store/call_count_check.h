// A read of calls checked against what the file says it holds. SQLite reads a window's rows
// along the time index (idx_events_timestamp); a damaged index page can end that walk early,
// or skip a subtree, without any error: the read is short and looks complete. The writer's
// per-second summaries (call_seconds) count every call the rows and runs held, so the calls
// read in each whole second of the window must be at least the summaries' count.
//
// What the comparison leaves out, because the file may rightly differ there:
//   - seconds cut by the window's edges (unless the edge lies outside the file's calls);
//   - seconds before the last retention cut (retention_state), whose rows and summaries were
//     deleted in separate batches;
//   - seconds with no summary yet (a live trace summarises a second 2 s later), and calls
//     written for a second after its summary (read > summary is not damage);
//   - as many calls as the sessions' store_errors: summarised calls whose rows a failed
//     write (a full disk) lost, reported as losses.
// A run of folded calls is read back spread evenly over its span, so its calls may land in
// other seconds than they started in: the seconds a run spans are compared as one.
//
// Files without summaries (written before schema 7) are checked by counting the window's
// call rows with a scan of the table instead. The original implementation's files are not
// checked.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "engine/call_run.h"
#include "hal/result.h"
#include "store/event_rows.h"
#include "store/sqlite_db.h"

namespace ingero::store {

// Every call of the whole file, read as the readers read them (its rows kept and its runs),
// against the per-second summaries: a block whose entry was lost hides its calls from every
// reader without an error. compact and export --format sqlite make it before writing.
ingero::Status verify_every_call(Db& db);

class CallCountCheck {
 public:
  // `f`: the read's window, pid and node. `span`: the first and last event of the file, from
  // a scan of the table (not the index): an edge of the window beyond it cuts no second.
  CallCountCheck(const EventFilter& f, std::pair<int64_t, int64_t> span);

  // A call read as a row (inside the window).
  void add(int64_t ts_ns) {
    int64_t s = second_of(ts_ns);
    if (s != cur_) {
      flush();
      cur_ = s;
    }
    ++cur_n_;
  }
  // A run read whole (it may reach outside the window).
  void add_run(const engine::RunShape& r);

  // Compares with the summaries (or, without them, a count of the rows) in the reader's
  // current snapshot: call it before the read transaction ends. An error names the file, the
  // first second found short and what to do.
  ingero::Status verify(Db& db);

 private:
  static constexpr int64_t kSecond = 1'000'000'000;
  static int64_t second_of(int64_t ts) {
    return ts >= 0 ? ts / kSecond : (ts - kSecond + 1) / kSecond;
  }
  struct Second {
    uint64_t read = 0, summarized = 0;
    bool joined = false;  // compared together with the next second (a run spans both)
  };
  void flush();
  ingero::Status verify_summaries(Db& db, int64_t lo, int64_t hi);
  ingero::Status verify_rows(Db& db);
  ingero::Error damaged(Db& db, const std::string& what) const;
  EventFilter f_;
  bool from_open_ = false, to_open_ = false;  // the window's edges lie outside the file
  std::map<int64_t, Second> seconds_;
  int64_t cur_ = INT64_MIN;
  uint64_t cur_n_ = 0;
  uint64_t read_ = 0;
};

}  // namespace ingero::store
