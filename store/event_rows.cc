#include "store/event_rows.h"

#include <array>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "store/archive_scan.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/legacy_views.h"
#include "store/op_dictionary.h"
#include "store/packed_fields.h"
#include "store/schema.h"
#include "store/sqlite_db.h"

namespace ingero::store {
namespace {

constexpr int kNone = -1;

// The columns a direct read takes from blocks, in the order of the events rows' (then, for
// host events, detail, saddr and daddr; then the decoded-field columns).
const std::vector<std::string> kArchiveCols = {
    "timestamp", "duration",  "pid",        "tid",    "comm",       "cgroup_id",
    "source",    "op",        "ret_code",   "status", "off_cpu_ns", "preempts",
    "switches",  "peer_comm", "stack_hash", "id",     "node"};
constexpr size_t kArchTs = 0, kArchRet = 8, kArchStatus = 9, kArchOffCpu = 10, kArchPreempts = 11,
                 kArchSwitches = 12, kArchId = 15, kArchStack = 14;
constexpr int kArchNode = 16, kArchDetail = 17;
// Where a block's decoded fields begin among the columns read.
size_t archive_fields_at(EventRows rows) { return rows == EventRows::kCalls ? 17 : 20; }

// Whether `table` and the dictionaries have every column a direct read needs: the original
// implementation's files (no ops.kind, no events.status) go through the views.
bool direct_columns_exist(Db& db, const char* table) {
  static const char* kNeeded[] = {"timestamp",  "duration", "pid",      "tid",       "comm",
                                  "cgroup_id",  "source",   "op",       "ret_code",  "status",
                                  "off_cpu_ns", "preempts", "switches", "peer_comm", "stack_hash",
                                  "node",       "detail",   "saddr",    "daddr"};
  for (const char* c : kNeeded)
    if (!db.column_exists(table, c)) return false;
  return db.column_exists("sources", "vendor") && db.column_exists("ops", "kind");
}

// The names of `view`'s columns into `shown`; false when it cannot be read.
bool view_columns(Db& db, const char* view, std::set<std::string>& shown) {
  auto st = db.prepare(std::string("SELECT * FROM ") + view + " LIMIT 0");
  if (!st) return false;
  for (int i = 0, n = sqlite3_column_count(st->get()); i < n; ++i)
    shown.insert(sqlite3_column_name(st->get(), i));
  return true;
}

}  // namespace

// A direct read's columns: the column of pack_fields(...), and the Field of each of its
// arguments; through the views, the mapping of store/event_columns.h.
struct EventCursor::Columns {
  EventColumns view;
  int packed = kNone;
  std::vector<uint8_t> packed_fields;
  // Reads of every call's row (merge, export): the calls folded into it (nested_calls,
  // nested_source, nested_op from `nested` on; through the views: nested_calls and nested_op,
  // whose api and kind `nested_names` gives).
  int nested = kNone;
  int view_nested_calls = kNone, view_nested_op = kNone;
  int node = kNone;     // the row's node, before its id (a direct read's rows)
  bool legacy = false;  // every call folded into another is a driver call (store/legacy_views.h)
  // Our files read through the views: a folded op's api and kind by its name.
  std::unordered_map<std::string, std::pair<std::string_view, hal::EventKind>> nested_names;
};

// The dictionaries of a direct read: (source, op) -> names, for the calls' sources only.
struct EventCursor::OpNames {
  struct Names {
    std::string_view vendor, api, op;
    hal::EventKind kind = hal::EventKind::kUnknown;
  };
  std::unordered_map<uint64_t, Names> by_id;  // source << 32 | op
  // The last call's: a loop's calls of one op come in a row (a step's launches). One cursor
  // reads on one thread.
  uint64_t last_id = UINT64_MAX;
  const Names* last = nullptr;
  const Names* find(uint64_t id) {
    if (last && id == last_id) return last;
    auto it = by_id.find(id);
    if (it == by_id.end()) return nullptr;
    last_id = id;
    return last = &it->second;
  }
};

bool EventCursor::open_direct(const EventFilter& f) {
  // Schema 10 keeps host events in host_rows and calls in call_store (store/call_store.h);
  // schema 11 host events in host_store's blocks, which host_rows reads (store/host_store.h).
  bool store = has_call_store(db_);
  bool host_blocks = rows_ == Rows::kHostEvents && store && has_host_store(db_);
  const char* table = store ? "host_rows" : "events";
  if (!direct_columns_exist(db_, table)) return false;
  bool calls = rows_ == Rows::kCalls;
  // The view's columns: a host event has the fields host_events shows, as through the view.
  std::set<std::string> shown;
  if (!calls && !view_columns(db_, "host_events", shown)) return false;
  if (!calls && f.fields) {  // of those, only the fields asked for
    std::set<std::string> asked;
    for (hal::Field field : *f.fields)
      if (shown.count(field_columns()[size_t(field)])) asked.insert(field_columns()[size_t(field)]);
    shown = std::move(asked);
  }
  auto sources = load_op_names(calls);
  if (!sources) return false;
  filter_ = f;
  auto select = select_list(table, calls, shown);
  if (!select) return false;
  if (calls) {  // calls seen at entry only read back with these durations
    auto u = UntimedDurations::load(db_);
    if (!u) return false;
    if (u->any()) untimed_ = std::make_unique<UntimedDurations>(std::move(*u));
  }
  bool archived = host_blocks || (calls && (store || db_.table_exists("archived_calls", "temp")));
  auto where = rows_where(f, *sources, store, archived);
  if (!where) return false;
  // Every host event is in a block: straight from them, as calls are (no SQL row per event).
  if (host_blocks) *where = " WHERE 0";
  auto st = db_.prepare(*select + " FROM main." + table + (f.scan ? " NOT INDEXED" : "") + *where);
  if (!st) return false;
  std::unique_ptr<ArchiveScan> scan;
  ArchiveScan::Bounds bounds{.lo_ts = f.from_ns, .hi_ts = f.to_ns};
  if (archived && !open_archive(f, store, scan, bounds)) return false;
  rows_of_ = MergedRows(std::make_unique<Stmt>(std::move(*st)), std::move(scan), bounds);
  return true;
}

std::optional<std::string> EventCursor::load_op_names(bool calls) {
  names_ = std::make_unique<OpNames>();
  std::set<uint64_t> source_ids;
  if (!for_each_op(db_, calls ? OpVendors::kCalls : OpVendors::kHost, [&](const OpEntry& o) {
        uint64_t id = uint64_t(o.source), op = uint64_t(o.op);
        names_->by_id[id << 32 | op] = {
            strings_.intern(calls ? o.vendor : "host"), strings_.intern(calls ? o.api : "kernel"),
            strings_.intern(o.name),
            hal::kind_from_name(o.kind).value_or(hal::EventKind::kUnknown)};
        source_ids.insert(id);
      }))
    return std::nullopt;
  std::string sources;
  for (uint64_t id : source_ids) sources += (sources.empty() ? "" : ",") + std::to_string(id);
  return sources;
}

std::optional<std::string> EventCursor::select_list(const char* table, bool calls,
                                                    const std::set<std::string>& shown) {
  std::string sql =
      "SELECT timestamp, duration, pid, tid, comm, cgroup_id, source, op, ret_code, status, "
      "off_cpu_ns, preempts, switches, peer_comm, stack_hash";
  if (!calls) sql += ", detail, saddr, daddr";
  cols_ = std::make_unique<Columns>();
  Columns& k = *cols_;
  std::string args;
  const auto& fields = field_columns();
  for (size_t i = 0; i < hal::kFieldCount; ++i)
    if (db_.column_exists(table, fields[i]) && (calls || shown.count(fields[i]))) {
      args += (args.empty() ? "" : ", ") + fields[i];
      k.packed_fields.push_back(uint8_t(i));
    }
  if (!args.empty()) {
    // Registered once per connection: SQLite refuses to replace a function while a statement
    // runs, and another cursor's may (the read's slices share connections).
    if (!db_.prepare("SELECT pack_fields(1)") &&
        sqlite3_create_function_v2(db_.handle(), "pack_fields", -1,
                                   SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                   sql_pack_fields, nullptr, nullptr, nullptr) != SQLITE_OK)
      return std::nullopt;
    k.packed = calls ? 15 : 18;
  }
  sql += args.empty() ? "" : ", pack_fields(" + args + ")";
  if (calls && filter_.rows) {
    k.nested = k.packed == kNone ? 15 : 16;
    for (const char* c : {"nested_calls", "nested_source", "nested_op"})
      sql += db_.column_exists(table, c) ? std::string(", ") + c : ", NULL";
  }
  // The row's node (whose means an untimed call takes), and its id, last: the merge with
  // archived calls orders ties by it.
  if (calls && db_.column_exists(table, "node")) {
    k.node = k.nested != kNone ? k.nested + 3 : k.packed != kNone ? k.packed + 1 : 15;
    sql += ", node";
  }
  return sql + ", id";
}

std::optional<std::string> EventCursor::rows_where(const EventFilter& f, const std::string& sources,
                                                   bool store, bool archived) {
  bool calls = rows_ == Rows::kCalls;
  std::string where = " WHERE timestamp BETWEEN " + std::to_string(f.from_ns) + " AND " +
                      std::to_string(f.to_ns) + " AND source IN (" + sources + ")";
  if (f.pid) where += " AND pid = " + std::to_string(*f.pid);
  if (f.node) where += " AND node = " + sql_quote(*f.node);
  if (store && calls) where = " WHERE 0";  // every call is in a block
  if (archived && !store) {
    // Every call row below the archive's last id is in a block (archiving takes rows in id
    // order, store/call_archive.h): the time index's entries below it are host events, passed
    // over by their rowid without reading the row (1.5 M in an hour-long trace).
    auto last = db_.kept_int("SELECT max(last_id) FROM main.call_blocks");
    if (!last) return std::nullopt;
    if (*last) where += " AND id > " + std::to_string(**last);
  }
  // Ties in start time come in the order written, as along the time index.
  return where + " ORDER BY timestamp, id";
}

bool EventCursor::open_archive(const EventFilter& f, bool store, std::unique_ptr<ArchiveScan>& scan,
                               ArchiveScan::Bounds& bounds) {
  // The archive is read where the reader installed it (TraceReader: a reader opened before
  // it existed knows it is stale).
  std::vector<std::string> cols = kArchiveCols;
  bool host = rows_ == Rows::kHostEvents;  // schema 11's host_store (open_direct)
  if (host)
    for (const char* c : {"detail", "saddr", "daddr"}) cols.emplace_back(c);
  // Host events read for some fields only: the columns they do not read are named "", which
  // no block has (read as NULL, and past when decoded).
  if (host && f.fields)
    for (size_t c : {kArchRet, kArchStatus, kArchOffCpu, kArchPreempts, kArchSwitches,
                     size_t(kArchDetail), size_t(kArchDetail) + 1, size_t(kArchDetail) + 2})
      cols[c].clear();
  const auto& fields = field_columns();
  for (uint8_t field : cols_->packed_fields) cols.push_back(fields[field]);
  if (cols_->nested != kNone)
    for (const char* c : {"nested_calls", "nested_source", "nested_op"}) cols.emplace_back(c);
  const BlockForm& form = host ? host_form() : f.rows ? sql_calls_form() : engine_calls_form();
  scan = store ? std::make_unique<ArchiveScan>(db_.handle(), form, db_.path(), std::move(cols),
                                               kArchTs, kArchId)
               : std::make_unique<ArchiveScan>(db_.handle(), "main.call_blocks", "archive block",
                                               db_.path(), std::move(cols), kArchTs, kArchId);
  filter_ = f;
  // The widest block bounds how early a block holding an event of the window can begin: the
  // blocks are then listed from the time index's entries near the window alone (a read cut
  // in 190 slices listed ~2 M entries, 0.9 s at 100 M events).
  auto span = db_.kept_int(std::string("SELECT max(last_ts - first_ts) FROM ") +
                           (host    ? "main.host_store"
                            : store ? "main.call_store"
                                    : "main.call_blocks"));
  if (!span) return false;
  if (*span) bounds.max_span = **span;
  return true;
}

template <class Row>
bool EventCursor::call_fields(const Row& st, hal::Event& e, std::string_view node) const {
  const OpNames::Names* found = names_->find(uint64_t(st.int64(6)) << 32 | uint64_t(st.int64(7)));
  if (!found)
    return false;  // an op missing from the dictionary: the view (an inner join) leaves it out too
  const OpNames::Names& n = *found;
  e.reset();
  e.ts_ns = uint64_t(st.int64(0));
  // A duration below 0 (a damaged or foreign file) is no duration: it read as 584 years in
  // every p99 and max, and made tail chains of them.
  const int64_t dur = st.int64(1);
  const bool negative = dur < 0;
  e.dur_ns = negative ? 0 : uint64_t(dur);
  e.pid = uint32_t(st.int64(2));
  e.tid = uint32_t(st.int64(3));
  e.set_comm(st.text_view(4));
  e.cgroup_id = uint64_t(st.int64(5));
  e.vendor = n.vendor;
  e.api = n.api;
  e.op = n.op;
  e.kind = n.kind;
  if (!st.is_null(8)) {
    e.has_ret = true;
    e.ret = st.int64(8);
  }
  if (!st.is_null(13)) e.set_peer_comm(st.text_view(13));
  if (rows_ == Rows::kCalls) {
    e.unfinished = st.int64(9) == 1;
    e.timed = st.int64(9) != 2 && !negative;  // 2: seen at entry only (store/call_block.h)
    if (!e.timed && untimed_)
      e.dur_ns = untimed_->of(node, e.pid, int(st.int64(6)), int(st.int64(7)));
    e.off_cpu_ns = uint64_t(st.int64(10));
    e.preempts = uint32_t(st.int64(11));
    e.switches = uint32_t(st.int64(12));
  }
  // A call's stack, and an on-CPU sample's (host events of other kinds have none): a merge
  // lost every sample's stack.
  e.stack_id = uint64_t(st.int64(14));
  return true;
}

bool EventCursor::row_event(const Stmt& st, hal::Event& e) const {
  const int node = cols_->node;
  if (!call_fields(st, e, node == kNone || st.is_null(node) ? "" : st.text_view(node)))
    return false;
  if (rows_ == Rows::kHostEvents) {  // what the host_events view shows of them
    if (!st.is_null(15)) e.detail = st.text(15);
    if (!st.is_null(16)) e.saddr = st.text(16);
    if (!st.is_null(17)) e.daddr = st.text(17);
  }
  return true;
}

bool EventCursor::archived_event(hal::Event& e) const {
  const ArchiveScan& s = rows_of_.scan();
  auto row = s.current();  // its first 15 columns are those of the events rows
  if (filter_.pid && (row.is_null(2) || uint32_t(row.int64(2)) != *filter_.pid)) return false;
  if (filter_.node && (row.is_null(kArchNode) || row.text_view(kArchNode) != *filter_.node))
    return false;
  if (!call_fields(row, e, row.is_null(kArchNode) ? "" : row.text_view(kArchNode))) return false;
  if (rows_ == Rows::kHostEvents) {  // what the host_events view shows of them
    if (!row.is_null(kArchDetail)) e.detail = row.text_view(kArchDetail);
    if (!row.is_null(kArchDetail + 1)) e.saddr = row.text_view(kArchDetail + 1);
    if (!row.is_null(kArchDetail + 2)) e.daddr = row.text_view(kArchDetail + 2);
  }
  const auto& to_field = cols_->packed_fields;
  const size_t first_field = archive_fields_at(rows_);
  const size_t nested = first_field + to_field.size();
  for (uint32_t col : s.live_columns())
    if (col >= first_field && col < nested)
      if (auto x = row.value(int(col)))
        e.set(static_cast<hal::Field>(to_field[col - first_field]), *x);
  if (cols_->nested != kNone) nested_call(row, int(nested), e);
  return true;
}

template <class Row>
void EventCursor::nested_call(const Row& row, int at, hal::Event& e) const {
  if (row.is_null(at) || row.int64(at) <= 0 || row.is_null(at + 1) || row.is_null(at + 2)) return;
  const OpNames::Names* n =
      names_->find(uint64_t(row.int64(at + 1)) << 32 | uint64_t(row.int64(at + 2)));
  if (!n) return;
  e.nested = uint32_t(row.int64(at));
  e.nested_api = n->api;
  e.nested_op = n->op;
  e.nested_kind = n->kind;
}

ingero::Result<bool> EventCursor::next_direct(hal::Event& e) {
  while (true) {
    auto more = rows_of_.next();
    if (!more || !*more) return more;
    if (rows_of_.archived()) {
      if (archived_event(e)) return true;
      continue;
    }
    const Stmt& st = rows_of_.row();
    if (!row_event(st, e)) continue;
    if (cols_->packed != kNone && !unpack_fields(st, e)) return bad_fields();
    if (cols_->nested != kNone) nested_call(st, cols_->nested, e);
    return true;
  }
}

uint64_t EventCursor::row_stack() const {
  if (rows_of_.archived()) return uint64_t(rows_of_.scan().current().int64(kArchStack));
  return uint64_t(rows_of_.row().int64(kArchStack));
}

bool EventCursor::unpack_fields(const Stmt& st, hal::Event& e) const {
  sqlite3_stmt* raw = st.get();
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(raw, cols_->packed));
  const uint8_t* end = p + sqlite3_column_bytes(raw, cols_->packed);
  const auto& to_field = cols_->packed_fields;
  while (p < end) {
    size_t arg = *p++;
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
      if (p == end || shift > 63) return false;
      uint8_t b = *p++;
      x |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (arg >= to_field.size()) return false;
    e.set(static_cast<hal::Field>(to_field[arg]), x);
  }
  return true;
}

ingero::Error EventCursor::bad_fields() const {
  return ingero::make_error(db_.path() + ": pack_fields returned a malformed value");
}

EventCursor::EventCursor(Db& db, Rows rows, StringPool& strings)
    : db_(db), rows_(rows), strings_(strings) {}
EventCursor::~EventCursor() = default;

ingero::Result<std::unique_ptr<EventCursor>> EventCursor::open(Db& db, Rows rows,
                                                               const EventFilter& f,
                                                               StringPool& strings, bool direct) {
  bool calls = rows == Rows::kCalls;
  if (direct) {
    // The original implementation's files (no ops.kind, no events.status) go through the
    // views.
    std::unique_ptr<EventCursor> c(new EventCursor(db, rows, strings));
    if (c->open_direct(f)) return c;
  }
  const char* view = calls ? "calls" : "host_events";
  std::string sql = std::string("SELECT * FROM ") + view + " WHERE ts_ns BETWEEN " +
                    std::to_string(f.from_ns) + " AND " + std::to_string(f.to_ns);
  if (calls && f.pid) sql += " AND pid = " + std::to_string(*f.pid);
  if (f.node && db.column_exists("events", "node")) sql += " AND node = " + sql_quote(*f.node);
  sql += " ORDER BY ts_ns";
  auto st = db.prepare(sql);
  if (!st) return st.error();
  std::unique_ptr<EventCursor> c(new EventCursor(db, rows, strings));
  c->stmt_ = std::make_unique<Stmt>(std::move(*st));
  c->cols_ = std::make_unique<Columns>();
  std::map<std::string, int, std::less<>> by_name;
  sqlite3_stmt* s = c->stmt_->get();
  for (int i = 0, n = sqlite3_column_count(s); i < n; ++i) by_name[sqlite3_column_name(s, i)] = i;
  c->cols_->view = EventColumns(rows, [&](std::string_view name) {
    auto it = by_name.find(name);
    return it == by_name.end() ? kNone : it->second;
  });
  if (!c->cols_->view.complete())
    return ingero::make_error(db.path() + ": the " + view + " view has no ts_ns or op column");
  if (calls && f.rows && by_name.count("nested_calls") && by_name.count("nested_op")) {
    if (auto st = c->nested_names_of_view(); !st) return st.error();
    c->cols_->view_nested_calls = by_name["nested_calls"];
    c->cols_->view_nested_op = by_name["nested_op"];
  }
  return c;
}

ingero::Status EventCursor::nested_names_of_view() {
  auto& names = cols_->nested_names;
  // The original implementation's files: a call folded into another is a driver call
  // (store/legacy_views.h), its kind that of its name (nested_call_of_view).
  if (detect_legacy(db_)) {
    cols_->legacy = true;
    return {};
  }
  if (!db_.column_exists("ops", "kind") || !db_.column_exists("sources", "api")) return {};
  auto st = db_.prepare(
      "SELECT o.name, s.api, o.kind FROM ops o JOIN sources s ON s.id = o.source_id "
      "WHERE s.vendor <> 'host'");
  if (!st) return st.error();
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) return {};
    names[st->text(0)] = {strings_.intern(st->text_view(1)),
                          hal::kind_from_name(st->text_view(2)).value_or(hal::EventKind::kUnknown)};
  }
}

void EventCursor::nested_call_of_view(hal::Event& e) const {
  const Stmt& st = *stmt_;
  int n = cols_->view_nested_calls, op = cols_->view_nested_op;
  if (st.is_null(n) || st.int64(n) <= 0 || st.is_null(op)) return;
  std::string_view name = st.text_view(op);
  e.nested = uint32_t(st.int64(n));
  e.nested_op = strings_.intern(name);
  if (cols_->legacy) {  // a driver call; 'op7' where the file's dictionary does not name it
    e.nested_api = strings_.intern("cuda_driver");
    e.nested_kind = hal::kind_from_name(legacy_kind(name)).value_or(hal::EventKind::kUnknown);
    return;
  }
  auto it = cols_->nested_names.find(std::string(name));
  if (it == cols_->nested_names.end()) {
    e.nested = 0;  // (never: our files name every op they store)
    e.nested_op = {};
    return;
  }
  e.nested_api = it->second.first;
  e.nested_kind = it->second.second;
}

ingero::Result<bool> EventCursor::next(hal::Event& e) {
  if (names_) return next_direct(e);
  auto r = stmt_->step();
  if (!r) return r.error();
  if (!*r) return false;
  cols_->view.read(*stmt_, e, strings_);
  if (cols_->view_nested_calls != kNone) nested_call_of_view(e);
  return true;
}

ingero::Status for_each_event(Db& db, EventCursor::Rows rows, const EventFilter& filter,
                              StringPool& strings,
                              const std::function<ingero::Status(const hal::Event&)>& fn) {
  auto cursor = EventCursor::open(db, rows, filter, strings);
  if (!cursor) return cursor.error();
  hal::Event e;
  while (true) {
    auto more = (*cursor)->next(e);
    if (!more) return more.error();
    if (!*more) return {};
    if (auto st = fn(e); !st) return st;
  }
}

}  // namespace ingero::store
