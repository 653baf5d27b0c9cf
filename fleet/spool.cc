#include "fleet/spool.h"

#include <sys/stat.h>

#include <set>

#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/schema.h"

namespace ingero::fleet {
namespace {

// "events e JOIN ..." -> "events"
std::string main_table(const TableSpec& t) {
  return t.source_from.substr(0, t.source_from.find(' '));
}

}  // namespace

std::string SpoolRow::text(int col) const {
  const unsigned char* p = sqlite3_column_text(s_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), size_t(sqlite3_column_bytes(s_, col)))
           : std::string();
}

void SpoolRow::append_row_binary(std::string& out, const std::vector<ChType>& types) const {
  RowBinary rb(out);
  for (size_t i = 0; i < types.size(); ++i) {
    int col = int(i);
    switch (sqlite3_column_type(s_, col)) {
      case SQLITE_NULL:
        rb.null(types[i]);
        break;
      case SQLITE_INTEGER:
        rb.integer(types[i], sqlite3_column_int64(s_, col));
        break;
      case SQLITE_FLOAT:
        rb.real(types[i], sqlite3_column_double(s_, col));
        break;
      default: {
        const unsigned char* p = sqlite3_column_text(s_, col);
        rb.text(types[i], std::string_view(reinterpret_cast<const char*>(p),
                                           p ? size_t(sqlite3_column_bytes(s_, col)) : 0));
      }
    }
  }
}

ingero::Result<std::unique_ptr<Spool>> Spool::open(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return ingero::Error::sys(path + ": cannot read the trace file", errno);
  auto db = store::Db::open(path, store::Db::Mode::kReadOnly);
  if (!db) return db.error();
  auto info = store::inspect(**db);
  if (!info) return info.error();
  if (info->format != store::TraceFormat::kIngero)
    return ingero::make_error(
        path + ": " +
        (info->format == store::TraceFormat::kLegacyGo
             ? "a trace from the original Go implementation: only files written by `ingero "
               "trace` are shipped (convert it with `ingero merge`)"
             : "not a trace file yet (no ingero schema)"));
  // Calls a `compact` archived are shipped as rows too: `events` here reads them back.
  if (auto a = store::install_call_archive(**db); !a)
    return ingero::make_error(path + ": " + a.error().message);
  std::unique_ptr<Spool> s(new Spool(std::move(*db), path, st.st_dev, st.st_ino));
  if (auto r = s->refresh(); !r) return r.error();
  return s;
}

ingero::Status Spool::refresh() {
  auto st = db_->prepare(
      "SELECT id, node, started_at, stopped_at, coalesce(host, ''), coalesce(flags, '') FROM "
      "sessions ORDER BY id");
  if (!st) return ingero::make_error(path_ + ": " + st.error().message);
  std::vector<SpoolSession> out;
  while (true) {
    auto r = st->step();
    if (!r) return ingero::make_error(path_ + ": reading sessions: " + r.error().message);
    if (!*r) break;
    out.push_back({st->int64(0), st->text(1), uint64_t(st->int64(2)), uint64_t(st->int64(3)),
                   st->text(4), st->text(5)});
  }
  sessions_ = std::move(out);
  return {};
}

const std::string& Spool::origin_node() const {
  static const std::string empty;
  return sessions_.empty() ? empty : sessions_.front().node;
}

std::vector<std::string> Spool::nodes() const {
  std::set<std::string> s = row_nodes_;
  for (const auto& x : sessions_) s.insert(x.node);
  return {s.begin(), s.end()};
}

ingero::Status Spool::refresh_nodes() {
  std::set<std::string> found;
  for (const TableSpec& t : fleet_tables()) {
    const std::string table = main_table(t);
    if (table == "events" || table == "sessions" || !db_->table_exists(table) ||
        !db_->column_exists(table, "node"))
      continue;
    auto st = db_->prepare("SELECT DISTINCT node FROM main." + table + " WHERE node IS NOT NULL");
    if (!st) return ingero::make_error(path_ + ": " + st.error().message);
    while (true) {
      auto r = st->step();
      if (!r)
        return ingero::make_error(path_ + ": reading " + table + "'s nodes: " + r.error().message);
      if (!*r) break;
      found.insert(st->text(0));
    }
  }
  row_nodes_ = std::move(found);
  return {};
}

bool Spool::replaced() const {
  struct stat st {};
  return stat(path_.c_str(), &st) != 0 || st.st_ino != ino_ || st.st_dev != dev_;
}

bool Spool::has_table(const TableSpec& t) const { return db_->table_exists(main_table(t)); }

std::string Spool::select_sql(const TableSpec& t, const std::string& main_from) const {
  std::string cols;
  bool events = main_table(t) == "events";
  for (const auto& c : t.columns) {
    std::string src = c.source;
    // Decoded-field columns added by later schema versions: NULL in older files.
    if (events && src.rfind("e.", 0) == 0 && !db_->column_exists("events", src.substr(2)))
      src = "NULL";
    // The first folded call's name: none in files written before calls were folded (v5).
    if (events && src == kNestedOpName && !db_->column_exists("events", "nested_op")) src = "''";
    // cgroup_metadata's name columns: NULL in files written before them.
    if (t.name == "cgroup_metadata" && src.rfind("g.", 0) == 0 &&
        !db_->column_exists("cgroup_metadata", src.substr(2)))
      src = "NULL";
    // Session counters added by later schema versions: -1, "not recorded", in older files.
    if (t.name == "sessions" && src.rfind("s.", 0) == 0 &&
        !db_->column_exists("sessions", src.substr(2)))
      src = "-1";
    cols += (cols.empty() ? "" : ", ") + src;
  }
  std::string from = t.source_from;
  if (!main_from.empty()) {
    // "events e JOIN ..." -> main_from + " JOIN ...": the table and its alias replaced.
    size_t alias_end = from.find(' ', from.find(' ') + 1);
    from = main_from + (alias_end == std::string::npos ? "" : from.substr(alias_end));
  }
  return "SELECT " + cols + " FROM " + from;
}

// A live trace archives calls as they come (after the tracer's own shipper has them): an
// `ingero ship` of the same file follows them once blocks appear.
ingero::Status Spool::follow_archive() {
  if (auto a = store::install_call_archive(*db_); !a)
    return ingero::make_error(path_ + ": " + a.error().message);
  return {};
}

ingero::Status Spool::select(const TableSpec& t, const std::string& tail,
                             const std::map<std::string, int64_t>& params, const RowFn& fn,
                             const std::string& main_from) {
  if (auto a = follow_archive(); !a) return a;
  const std::string cache_key = t.name + "\n" + main_from;
  auto it = select_cache_.find(cache_key);
  if (it == select_cache_.end())
    it = select_cache_.emplace(cache_key, select_sql(t, main_from)).first;
  auto st = db_->prepare(it->second + " " + tail);
  if (!st) return ingero::make_error(path_ + ": reading " + t.name + ": " + st.error().message);
  sqlite3_stmt* s = st->get();
  auto bind = [&](const char* name, int64_t v) {
    if (int i = sqlite3_bind_parameter_index(s, name)) sqlite3_bind_int64(s, i, v);
  };
  bind(":file_start", int64_t(file_start()));
  if (int i = sqlite3_bind_parameter_index(s, ":node"))
    sqlite3_bind_text(s, i, origin_node().c_str(), -1, SQLITE_TRANSIENT);
  for (const auto& [k, v] : params) bind(k.c_str(), v);
  SpoolRow row(s, t);
  while (true) {
    auto r = st->step();
    if (!r) return ingero::make_error(path_ + ": reading " + t.name + ": " + r.error().message);
    if (!*r || !fn(row)) break;
  }
  return {};
}

ingero::Result<uint64_t> Spool::count_after(const TableSpec& t, int64_t after) {
  if (auto a = follow_archive(); !a) return a.error();
  // events may be the view over archived calls, which has no rowid; its id is the rowid.
  auto st = db_->prepare("SELECT count(*) FROM " + main_table(t) +
                         (main_table(t) == "events" ? " WHERE id > ?" : " WHERE rowid > ?"));
  if (!st) return ingero::make_error(path_ + ": " + st.error().message);
  st->bind(1, after);
  auto r = st->step();
  if (!r) return ingero::make_error(path_ + ": " + r.error().message);
  return uint64_t(st->int64(0));
}

ingero::Result<std::vector<int64_t>> Spool::stack_ids() {
  std::vector<int64_t> out;
  auto st = db_->prepare("SELECT DISTINCT stack_id FROM stack_frames ORDER BY stack_id");
  if (!st) return ingero::make_error(path_ + ": " + st.error().message);
  while (true) {
    auto r = st->step();
    if (!r) return ingero::make_error(path_ + ": reading stacks: " + r.error().message);
    if (!*r) break;
    out.push_back(st->int64(0));
  }
  return out;
}

ingero::Result<int64_t> Spool::frame_count() {
  auto n = db_->query_int("SELECT count(*) FROM stack_frames");
  if (!n) return ingero::make_error(path_ + ": " + n.error().message);
  return n->value_or(0);
}

ingero::Result<Spool::Folding> Spool::folding() {
  Folding f;
  // Schema 10: the blocks folded for good (store/call_store.h); before, call_folding.
  bool store = store::has_call_store(*db_);
  if (!store && !db_->table_exists("call_folding")) return f;
  auto st =
      db_->prepare(store ? "SELECT coalesce(sum(folded), 0), coalesce(max(last_id), 0) FROM "
                           "call_store WHERE full IS NULL AND folded > 0"
                         : "SELECT folded_calls, last_event_id FROM call_folding WHERE id = 1");
  if (!st) return ingero::make_error(path_ + ": " + st.error().message);
  auto r = st->step();
  if (!r) return ingero::make_error(path_ + ": " + r.error().message);
  if (*r) f = {uint64_t(st->int64(0)), st->int64(1)};
  return f;
}

}  // namespace ingero::fleet
