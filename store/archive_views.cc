// The reading side of the call archive (store/call_archive.h): the virtual tables and TEMP views
// that give archived calls and runs back as rows, and questions answered from the blocks' entries.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "store/archive_internal.h"
#include "store/archive_table.h"
#include "store/call_archive.h"
#include "store/call_store.h"
#include "store/host_store.h"
#include "store/schema.h"

namespace ingero::store {
namespace archive_detail {

// main.`table`'s columns in the order `SELECT *` gives them: each name, and whether it is
// generated.
ingero::Result<std::vector<std::pair<std::string, bool>>> table_columns(Db& db, const char* table) {
  auto st = db.prepare("SELECT name, hidden FROM pragma_table_xinfo(?, 'main')");
  if (!st) return st.error();
  st->bind(1, std::string_view(table));
  std::vector<std::pair<std::string, bool>> cols;  // name, generated
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    cols.emplace_back(st->text(0), st->int64(1) != 0);
  }
  return cols;
}

std::string quoted(const std::string& name) { return "\"" + name + "\""; }

bool has_blocks(Db& db, const char* blocks) {
  if (!db.table_exists(blocks)) return false;
  auto n = db.query_int(std::string("SELECT 1 FROM main.") + blocks + " LIMIT 1");
  return n && n->has_value();
}

}  // namespace archive_detail

using namespace archive_detail;

bool has_call_archive(Db& db) { return has_blocks(db, kCalls.blocks); }
bool has_run_archive(Db& db) { return has_blocks(db, kRuns.blocks); }

namespace {

// Where events are besides main.events: (table, its first start's column). A folded call is in
// a run; a block's calls may all be in runs, and its first one with them.
std::vector<std::pair<const char*, const char*>> event_places(Db& db) {
  std::vector<std::pair<const char*, const char*>> out;
  for (auto [table, ts] : {std::pair{"call_blocks", "first_ts"},
                           {"recent_blocks", "first_ts"},
                           {"run_blocks", "first_ts"},
                           {"call_runs", "timestamp"}})
    if (db.table_exists(table)) out.emplace_back(table, ts);
  return out;
}

}  // namespace

std::string node_names_sql(Db& db) {
  if (has_call_store(db))
    return std::string("SELECT node FROM ") +
           (has_host_store(db) ? "main.host_store" : "main.host_rows") +
           " UNION SELECT node FROM main.call_store ORDER BY 1";
  auto places = event_places(db);
  if (places.empty()) return "SELECT DISTINCT node FROM main.events ORDER BY node";
  std::string sql = "SELECT node FROM main.events";
  for (auto [table, ts] : places) sql += std::string(" UNION SELECT node FROM main.") + table;
  return sql + " ORDER BY 1";
}

std::string first_timestamp_sql(Db& db) {
  if (has_call_store(db))
    return std::string("SELECT min(t) FROM (SELECT ") +
           (has_host_store(db) ? "min(first_ts) AS t FROM main.host_store"
                               : "min(timestamp) AS t FROM main.host_rows") +
           " UNION ALL SELECT min(first_ts) FROM main.call_store)";
  auto places = event_places(db);
  if (places.empty()) return "SELECT min(timestamp) FROM main.events";
  std::string sql = "SELECT min(t) FROM (SELECT min(timestamp) AS t FROM main.events";
  for (auto [table, ts] : places)
    sql += std::string(" UNION ALL SELECT min(") + ts + ") FROM main." + table;
  return sql + ")";
}

ingero::Result<uint64_t> count_archived(Db& db, int64_t from_ns, int64_t to_ns,
                                        const std::optional<std::string>& node) {
  if (!has_call_archive(db)) return uint64_t(0);
  std::string of_node = node ? " AND node = " + sql_quote(*node) : "";
  auto whole =
      db.query_int("SELECT coalesce(sum(rows), 0) FROM main.call_blocks WHERE first_ts >= " +
                   std::to_string(from_ns) + " AND last_ts <= " + std::to_string(to_ns) + of_node);
  if (!whole) return whole.error();
  uint64_t n = uint64_t(whole->value_or(0));
  auto edges = db.prepare(
      "SELECT first_id, last_id FROM main.call_blocks WHERE first_ts <= ?2 AND last_ts >= ?1 AND "
      "NOT (first_ts >= ?1 AND last_ts <= ?2)" +
      of_node);
  if (!edges) return edges.error();
  edges->bind(1, from_ns).bind(2, to_ns);
  auto count = db.prepare(
      "SELECT count(*) FROM temp.archived_calls WHERE id BETWEEN ? AND ? AND timestamp BETWEEN ? "
      "AND ?" +
      of_node);
  if (!count) return count.error();
  while (true) {
    auto r = edges->step();
    if (!r) return r.error();
    if (!*r) break;
    count->reset();
    count->bind(1, edges->int64(0)).bind(2, edges->int64(1)).bind(3, from_ns).bind(4, to_ns);
    auto c = count->step();
    if (!c) return c.error();
    n += uint64_t(count->int64(0));
  }
  return n;
}

namespace {

// The first call row id of the copies in recent_blocks, or the greatest id when none: every
// call row from it on is a row of `events` as the views give it (store/archive_fold.h).
constexpr const char* kRecentFrom =
    "(SELECT coalesce((SELECT first_id FROM main.recent_blocks ORDER BY last_id LIMIT 1), "
    "9223372036854775807))";

// temp.<archive> and the TEMP view named like the table over both. In a file whose calls were
// folded as they were archived (recent_blocks, schema 9), the view of calls takes the calls that
// still have their copy from temp.recent_calls instead of the rows kept of them, and the view
// of runs leaves out the runs of those calls: each call comes once, as a row or in a run.
ingero::Status install(Db& db, const Spec& spec) {
  const bool calls = std::string_view(spec.table) == kCalls.table;
  const bool recent = db.table_exists("recent_blocks");
  if (db.table_exists(spec.archive, "temp")) return {};
  // Wherever the file can hold blocks, whether it holds one yet or not: a reader of a trace
  // being written reads the blocks archived after it opened (the virtual table reads them
  // per query), and no read finds the file archived and its views missing.
  if (!db.table_exists(spec.blocks)) return {};
  auto cols = table_columns(db, spec.table);
  if (!cols) return cols.error();
  std::string select;
  for (const auto& [name, generated] : *cols) {
    std::string expr = quoted(name);
    if (generated) {
      auto g = std::find_if(std::begin(kEventGeneratedColumns), std::end(kEventGeneratedColumns),
                            [&](const GeneratedColumn& c) { return name == c.name; });
      if (g == std::end(kEventGeneratedColumns))
        return ingero::make_error(std::string(spec.table) + "." + name +
                                  " is a generated column this build lacks");
      expr = std::string("(") + g->expr + ") AS " + quoted(name);
    }
    select += (select.empty() ? "" : ", ") + expr;
  }
  if (auto st = create_archive_table(db, spec.archive, spec.table, spec.blocks); !st) return st;
  std::string rows = "SELECT * FROM main." + std::string(spec.table);
  std::string archived = "SELECT " + select + " FROM temp." + spec.archive;
  if (recent && calls) {
    if (auto st = create_archive_table(db, "recent_calls", spec.table, "recent_blocks"); !st)
      return st;
    archived += " WHERE id < " + std::string(kRecentFrom) + " UNION ALL SELECT " + select +
                " FROM temp.recent_calls";
  } else if (recent) {
    std::string shown =
        " WHERE first_call_id IS NULL OR first_call_id < " + std::string(kRecentFrom);
    rows += shown;
    archived += shown;
  }
  return db.exec(std::string("DROP VIEW IF EXISTS temp.") + spec.table + ";\nCREATE TEMP VIEW " +
                 spec.table + " AS " + rows + " UNION ALL " + archived + ";\n");
}

}  // namespace

ingero::Status install_call_archive(Db& db) {
  if (auto st = install(db, kCalls); !st) return st;
  return install(db, kRuns);
}

std::pair<bool, bool> call_archive_views(Db& db) {
  return {db.table_exists(kCalls.blocks), db.table_exists(kRuns.blocks)};
}

}  // namespace ingero::store
