// Events read back from a trace file, as rows of the contract views (`calls`, `host_events`)
// decoded by the one mapping of store/event_columns.h. The engine's source, `merge` and the MCP
// tools read events only through this cursor.
//
// Columns are matched by name when the statement is prepared: the views of our files and the
// original implementation's files differ in which optional columns exist, never in meaning.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "hal/event.h"
#include "hal/result.h"
#include "store/event_columns.h"
#include "store/merged_rows.h"
#include "store/untimed_durations.h"

namespace ingero::store {

class Db;

// Which rows: a time window on ts_ns (wall-clock Unix ns, inclusive), optionally one process
// (calls only: host context is about every process) and one node.
struct EventFilter {
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  std::optional<uint32_t> pid;
  std::optional<std::string> node;
  // Our own files: read the table in order and sort what matches, instead of walking the
  // time index (which looks every row up): for a window that covers the file.
  bool scan = false;
  // Calls of schema 10 (store/call_store.h): every call that has its row (as SQL reads them:
  // merge, export), not the folded form the engine reads (the calls kept; runs come through
  // RunCursor).
  bool rows = false;
  // Host events: only these fields, and no return code, detail or addresses (what the engine's
  // host context reads: engine::TraceSource::host_context_events); nullopt: all that the
  // host_events view shows.
  std::optional<std::vector<hal::Field>> fields;
};

class EventCursor {
 public:
  using Rows = EventRows;
  // Prepares the query over `db`'s contract views, in ts_ns order. An unknown view or a
  // malformed file is an Error naming the file. Our own files are read straight from the
  // events table, with what the views would give; `direct` false reads through the views
  // (tests compare the two).
  static ingero::Result<std::unique_ptr<EventCursor>> open(Db& db, Rows rows,
                                                           const EventFilter& filter,
                                                           StringPool& strings, bool direct = true);
  ~EventCursor();
  EventCursor(const EventCursor&) = delete;
  EventCursor& operator=(const EventCursor&) = delete;

  // The next row into `e` (reset first): true; false at the end; an Error when SQLite
  // reports one (corruption in the middle of the file is an error, never a short read).
  ingero::Result<bool> next(hal::Event& e);
  // Read straight from the events table (not through the views). Then row_stack() is the
  // current row's stack_hash, which host_events does not show (on-CPU samples have one).
  // A file's archived calls (store/call_archive.h), schema 10's calls and schema 11's host
  // events are read beside the table's rows, straight from their blocks
  // (store/archive_scan.h), and the two merged in (timestamp, id) order.
  bool direct() const { return names_ != nullptr; }
  // Read straight from blocks (calls of schema 10, host events of schema 11, archived calls),
  // beside any rows of the table.
  bool from_blocks() const { return rows_of_.has_scan(); }
  uint64_t row_stack() const;

 private:
  struct Columns;
  struct OpNames;
  EventCursor(Db& db, Rows rows, StringPool& strings);
  // Our own files: rows straight from the events table, (source, op) resolved through the
  // dictionaries once (the views join them on every row). False when the file lacks a column
  // the direct read needs; the view is used then.
  bool open_direct(const EventFilter& f);
  // open_direct's steps; each false or nullopt when SQLite fails. The dictionaries of the
  // rows' sources (calls: every vendor but host) into names_: those sources' ids, as "1,2".
  std::optional<std::string> load_op_names(bool calls);
  // "SELECT ..." of the rows' columns, the packed fields (pack_fields(), registered here) and
  // the id; into cols_, which fields it packs. `shown`: the fields host_events shows.
  std::optional<std::string> select_list(const char* table, bool calls,
                                         const std::set<std::string>& shown);
  // " WHERE ... ORDER BY timestamp, id": the filter's rows of `sources` not in a block.
  std::optional<std::string> rows_where(const EventFilter& f, const std::string& sources,
                                        bool store, bool archived);
  // The scan of the archived calls (schema 10's call_store, or an older file's call_blocks)
  // and how long before the window its blocks may begin (bounds.max_span).
  bool open_archive(const EventFilter& f, bool store, std::unique_ptr<ArchiveScan>& scan,
                    ArchiveScan::Bounds& bounds);
  ingero::Result<bool> next_direct(hal::Event& e);
  // What a call row and an archived call share (columns 0-14 of each): false when its op is
  // missing from the dictionary.
  template <class Row>
  bool call_fields(const Row& st, hal::Event& e, std::string_view node) const;
  // The current events row into `e`: false when its op is missing from the dictionary.
  bool row_event(const Stmt& st, hal::Event& e) const;
  // The scan's current block row into `e`: false when it is not in the filter (pid, node)
  // or its op is missing from the dictionary.
  bool archived_event(hal::Event& e) const;
  // The direct read's optional fields, from one pack_fields() blob; false if it is malformed.
  bool unpack_fields(const Stmt& st, hal::Event& e) const;
  // The calls folded into the call (nested_calls, nested_source, nested_op at columns `at`
  // on) into `e`: reads of every call's row only (EventFilter::rows).
  template <class Row>
  void nested_call(const Row& row, int at, hal::Event& e) const;
  // Through the views: nested_calls and nested_op by name, their api and kind from the file's
  // dictionary.
  void nested_call_of_view(hal::Event& e) const;
  // Their api and kind by op name, from the file's dictionary (view reads of every row).
  ingero::Status nested_names_of_view();
  ingero::Error bad_fields() const;
  Db& db_;
  Rows rows_;
  StringPool& strings_;
  std::unique_ptr<Stmt> stmt_;  // through the views
  MergedRows rows_of_;          // a direct read: main.events, and any archived calls
  EventFilter filter_;          // what archived calls are checked against
  std::unique_ptr<Columns> cols_;
  std::unique_ptr<OpNames> names_;  // set when reading directly
  // Calls seen at entry only read back with these durations (store/untimed_durations.h).
  std::unique_ptr<UntimedDurations> untimed_;
};

// Reads every row of `rows` matching `filter` into `fn`; stops at the first Error (a read
// error, or one `fn` returns).
ingero::Status for_each_event(Db& db, EventCursor::Rows rows, const EventFilter& filter,
                              StringPool& strings,
                              const std::function<ingero::Status(const hal::Event&)>& fn);

}  // namespace ingero::store
