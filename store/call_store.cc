#include "store/call_store.h"

#include "store/archive_table.h"
#include "store/call_block.h"
#include "store/host_store.h"
#include "store/schema.h"

namespace ingero::store {

std::string call_store_ddl() {
  return "CREATE TABLE IF NOT EXISTS call_store (\n"
         "  id INTEGER PRIMARY KEY,\n"
         "  node TEXT NOT NULL DEFAULT '',\n"
         "  session_id INTEGER NOT NULL DEFAULT 0,\n"
         "  first_id INTEGER NOT NULL,        -- the least and greatest call id\n"
         "  last_id INTEGER NOT NULL,\n"
         "  first_ts INTEGER NOT NULL,        -- the least and greatest start, Unix ns\n"
         "  last_ts INTEGER NOT NULL,\n"
         "  end_ts INTEGER NOT NULL,          -- the greatest start + duration\n"
         "  calls INTEGER NOT NULL,           -- calls in the block\n"
         "  untimed INTEGER NOT NULL DEFAULT 0,  -- of them, seen at entry only\n"
         "  kept INTEGER,                     -- folded form: calls kept, runs, calls in runs\n"
         "  runs INTEGER,                     --   (NULL while the block fills)\n"
         "  folded INTEGER,\n"
         "  full BLOB,                        -- every call (NULL once folded for good)\n"
         "  kept_data BLOB,                   -- the calls kept, the runs: NULL where folding\n"
         "  run_data BLOB                     --   left the block whole, or while it fills\n"
         ");\n"
         "CREATE INDEX IF NOT EXISTS idx_call_store_ts ON call_store(first_ts);\n"
         "CREATE INDEX IF NOT EXISTS idx_call_store_id ON call_store(last_id, first_id, first_ts, "
         "last_ts, calls);\n";
}

namespace {

// The columns of `events` over both: host_rows' stored ones, and a call's (its block lacks
// detail, saddr and daddr), then the generated ones.
std::string events_select(bool calls) {
  std::string cols;
  for (const auto& c : call_column_names()) {
    if (c == "peer_comm")
      cols += calls ? "peer_comm, NULL, NULL, NULL, " : "peer_comm, detail, saddr, daddr, ";
    else
      cols += c + ", ";
  }
  std::string gen;
  for (const auto& g : kEventGeneratedColumns)
    gen += std::string(", ") + (calls ? std::string(g.expr) + " AS " : std::string()) + g.name;
  return "SELECT " + cols.substr(0, cols.size() - 2) + gen + " FROM " +
         (calls ? "ingero_calls" : "main.host_rows");
}

std::string run_columns() {
  std::string cols;
  for (const auto& c : run_column_names()) cols += (cols.empty() ? "" : ", ") + c;
  return cols;
}

}  // namespace

std::string call_store_views_sql() {
  return "DROP VIEW IF EXISTS main.events;\nCREATE VIEW events AS\n" + events_select(false) +
         "\nUNION ALL\n" + events_select(true) +
         ";\nDROP VIEW IF EXISTS main.call_runs;\nCREATE VIEW call_runs AS\nSELECT " +
         run_columns() + " FROM ingero_runs;\n";
}

const BlockForm& engine_calls_form() {
  static const BlockForm f{
      "main.call_store", "coalesce(kept_data, full)", "coalesce(kept, calls)", "", false,
      "call block"};
  return f;
}
const BlockForm& engine_runs_form() {
  static const BlockForm f{"main.call_store",      "run_data", "runs",
                           "run_data IS NOT NULL", false,      "call block (runs)"};
  return f;
}
const BlockForm& sql_calls_form() {
  static const BlockForm f{"main.call_store",
                           "coalesce(full, kept_data)",
                           "CASE WHEN full IS NULL THEN kept ELSE calls END",
                           "",
                           false,
                           "call block"};
  return f;
}
const BlockForm& sql_runs_form() {
  static const BlockForm f{
      "main.call_store",  "run_data", "runs", "full IS NULL AND run_data IS NOT NULL", false,
      "call block (runs)"};
  return f;
}

int register_call_store_tables(sqlite3* db) {
  static const EponymousBlocks calls{sql_calls_form(), call_column_names()};
  static const EponymousBlocks runs{sql_runs_form(), run_column_names()};
  int rc = register_eponymous_blocks(db, "ingero_calls", &calls);
  if (rc == SQLITE_OK) rc = register_eponymous_blocks(db, "ingero_runs", &runs);
  if (rc == SQLITE_OK) rc = register_host_store_table(db);
  return rc;
}

namespace {
// The rows of `form` (counted in its blocks' entries by `form.rows`) that start in
// [from_ns, to_ns], of `node` where given: the blocks inside the window by their entries, the
// others by their rows' timestamps. `what` names them in errors.
ingero::Result<uint64_t> count_in_window(Db& db, BlockForm form, int64_t from_ns, int64_t to_ns,
                                         const std::optional<std::string>& node, const char* what) {
  std::string inside =
      "first_ts >= " + std::to_string(from_ns) + " AND last_ts <= " + std::to_string(to_ns);
  std::string of_node = node ? " AND node = " + sql_quote(*node) : std::string();
  auto whole = db.query_int("SELECT coalesce(sum(" + form.rows + "), 0) FROM " + form.table +
                            " WHERE " + inside + of_node);
  if (!whole) return whole.error();
  uint64_t n = uint64_t(whole->value_or(0));
  form.filter =
      (form.filter.empty() ? "" : "(" + form.filter + ") AND ") + "NOT (" + inside + ")" + of_node;
  ArchiveScan scan(db.handle(), form, db.path(), {"timestamp", "id", "node"}, 0, 1);
  ArchiveScan::Bounds b{.lo_ts = from_ns, .hi_ts = to_ns};
  int rc = scan.start(b, false);
  for (; rc == SQLITE_OK && !scan.eof(); rc = scan.next())
    if (!node || scan.current().text_view(2) == *node) ++n;
  if (rc != SQLITE_OK)
    return ingero::make_error(!scan.error().empty()
                                  ? scan.error()
                                  : db.path() + ": counting " + what + ": " + sqlite3_errstr(rc));
  return n;
}
}  // namespace

ingero::Status check_block_counts(Db& db) {
  // Each rule: the first entry that breaks it, and what it then says. An entry is written with
  // its block, so none of these happens but by damage.
  struct Rule {
    const char *table, *sql, *what;
  };
  static constexpr Rule kRules[] = {
      {"call_store",
       "SELECT id, calls, kept + coalesce(folded, 0) FROM main.call_store WHERE kept IS NOT NULL "
       "AND calls != kept + coalesce(folded, 0)",
       "its entry counts %1 calls where its folded form holds %2"},
      {"call_store",
       "SELECT id, untimed, calls FROM main.call_store WHERE untimed < 0 OR untimed > calls OR "
       "calls < 1",
       "its entry counts %1 untimed of %2 calls"},
      // Folded: both forms or neither (left whole); whole or filling: its calls themselves.
      {"call_store",
       "SELECT id, kept_data IS NULL, run_data IS NULL FROM main.call_store WHERE (kept IS NOT "
       "NULL AND (kept_data IS NULL) != (run_data IS NULL)) OR (full IS NULL AND kept_data IS "
       "NULL)",
       "its calls are in none of its forms, or in half of its folded form"},
      {"call_store",
       "SELECT id, first_id, last_id FROM main.call_store WHERE first_id > last_id OR first_ts > "
       "last_ts OR last_ts > end_ts",
       "its entry's id or time range is reversed"},
      {"host_store",
       "SELECT id, first_id, last_id FROM main.host_store WHERE first_id > last_id OR first_ts > "
       "last_ts OR last_ts > end_ts OR events < 1",
       "its entry's id or time range is reversed, or it counts no event"},
      // A block entered twice (a copied row) counted its calls twice.
      {"call_store",
       "SELECT id, first_id, prev FROM (SELECT id, first_id, lag(last_id) OVER (ORDER BY "
       "first_id, id) AS prev FROM main.call_store) WHERE first_id <= prev",
       "its ids from %1 overlap the block before it, which ends at %2"},
      {"host_store",
       "SELECT id, first_id, prev FROM (SELECT id, first_id, lag(last_id) OVER (ORDER BY "
       "first_id, id) AS prev FROM main.host_store) WHERE first_id <= prev",
       "its ids from %1 overlap the block before it, which ends at %2"},
  };
  for (const Rule& rule : kRules) {
    if (!db.table_exists(rule.table)) continue;
    auto st = db.prepare(std::string(rule.sql) + " ORDER BY 1 LIMIT 1");
    if (!st) return st.error();
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) continue;
    std::string what = rule.what;
    for (auto [mark, col] : {std::pair{"%1", 1}, std::pair{"%2", 2}})
      if (size_t at = what.find(mark); at != std::string::npos)
        what.replace(at, 2, std::to_string(st->int64(col)));
    return ingero::make_error(db.path() + ": " +
                              (rule.table == std::string_view("host_store") ? "host" : "call") +
                              " block " + std::to_string(st->int64(0)) + ": " + what);
  }
  return {};
}

ingero::Result<uint64_t> count_kept_calls(Db& db, int64_t from_ns, int64_t to_ns,
                                          const std::optional<std::string>& node) {
  return count_in_window(db, engine_calls_form(), from_ns, to_ns, node, "calls");
}

ingero::Result<uint64_t> count_host_events(Db& db, int64_t from_ns, int64_t to_ns,
                                           const std::optional<std::string>& node) {
  return count_in_window(db, host_form(), from_ns, to_ns, node, "host events");
}

std::string host_table(Db& db) { return has_call_store(db) ? "main.host_rows" : "main.events"; }

bool has_call_store(Db& db) { return db.is_table("call_store"); }

}  // namespace ingero::store
