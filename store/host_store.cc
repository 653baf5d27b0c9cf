#include "store/host_store.h"

#include <algorithm>
#include <vector>

#include "store/archive_table.h"
#include "store/block_level.h"
#include "store/schema.h"
#include "store/table_defs.h"

namespace ingero::store {

std::string host_store_ddl() {
  return "CREATE TABLE IF NOT EXISTS host_store (\n"
         "  id INTEGER PRIMARY KEY,\n"
         "  node TEXT NOT NULL DEFAULT '',\n"
         "  session_id INTEGER NOT NULL DEFAULT 0,\n"
         "  first_id INTEGER NOT NULL,        -- the least and greatest event id\n"
         "  last_id INTEGER NOT NULL,\n"
         "  first_ts INTEGER NOT NULL,        -- the least and greatest start, Unix ns\n"
         "  last_ts INTEGER NOT NULL,\n"
         "  end_ts INTEGER NOT NULL,          -- the greatest start + duration\n"
         "  events INTEGER NOT NULL,          -- host events in the block\n"
         "  data BLOB NOT NULL                -- the events (store/host_block.h)\n"
         ");\n"
         "CREATE INDEX IF NOT EXISTS idx_host_store_ts ON host_store(first_ts);\n"
         "CREATE INDEX IF NOT EXISTS idx_host_store_id ON host_store(last_id, first_id, first_ts, "
         "last_ts, events);\n";
}

std::string host_rows_view_sql() {
  std::string cols;
  for (const auto& c : events_def().columns) cols += (cols.empty() ? "" : ", ") + c.name;
  for (const auto& g : kEventGeneratedColumns) cols += std::string(", ") + g.expr + " AS " + g.name;
  return "DROP VIEW IF EXISTS main.host_rows;\nCREATE VIEW host_rows AS SELECT " + cols +
         " FROM ingero_host;\n";
}

const char* host_store_insert_sql() {
  return "INSERT OR REPLACE INTO host_store (id, node, session_id, first_id, last_id, first_ts, "
         "last_ts, end_ts, events, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
}

ingero::Status write_host_block(Stmt& ins, int64_t id, const HostBlock& b, std::string& scratch) {
  if (!b.columns().encode_into(scratch, kLiveBlockLevel))
    return ingero::make_error("compressing a block of host events failed");
  ins.reset();
  ins.bind(1, id)
      .bind(2, b.columns().text(0, kCallNode))
      .bind(3, b.columns().int64(0, kCallSession))
      .bind(4, b.first_id())
      .bind(5, b.last_id())
      .bind(6, b.first_ts())
      .bind(7, b.last_ts())
      .bind(8, b.end_ts())
      .bind(9, int64_t(b.size()));
  sqlite3_bind_blob(ins.get(), 10, scratch.data(), int(scratch.size()), SQLITE_STATIC);
  auto r = ins.step();
  sqlite3_bind_null(ins.get(), 10);  // `scratch` is not the statement's to keep
  if (!r) return r.error();
  return {};
}

const BlockForm& host_form() {
  static const BlockForm f{"main.host_store", "data", "events", "", true, "host block"};
  return f;
}

int register_host_store_table(sqlite3* db) {
  static const EponymousBlocks host{host_form(), host_column_names()};
  return register_eponymous_blocks(db, "ingero_host", &host);
}

bool has_host_store(Db& db) { return db.is_table("host_store"); }

namespace {

// host_rows' stored columns (its generated ones are not stored), and where each goes in a block.
ingero::Result<std::vector<std::pair<std::string, size_t>>> stored_host_columns(Db& db) {
  auto st = db.prepare("SELECT name FROM pragma_table_xinfo('host_rows', 'main') WHERE hidden = 0");
  if (!st) return st.error();
  const auto& names = host_column_names();
  std::vector<std::pair<std::string, size_t>> out;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    std::string name = st->text(0);
    auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end())
      return ingero::make_error("host_rows has a column this build does not know: " + name);
    out.emplace_back(name, size_t(it - names.begin()));
  }
  return out;
}

// The rows of host_rows, in id order, into blocks written with `ins`.
ingero::Status copy_host_rows(Db& db, const std::vector<std::pair<std::string, size_t>>& cols,
                              Stmt& ins) {
  std::string list;
  for (const auto& [name, at] : cols) list += (list.empty() ? "" : ", ") + name;
  auto rows = db.prepare("SELECT " + list + " FROM main.host_rows ORDER BY id");
  if (!rows) return rows.error();
  HostBlock block;
  std::string node, scratch;
  int64_t session = 0, block_id = 0;
  auto flush = [&]() -> ingero::Status {
    if (block.empty()) return {};
    if (auto st = write_host_block(ins, ++block_id, block, scratch); !st) return st;
    block.clear();
    return {};
  };
  while (true) {
    auto r = rows->step();
    if (!r) return r.error();
    if (!*r) break;
    std::string row_node;
    int64_t row_session = 0, id = 0, ts = 0, dur = 0;
    for (size_t i = 0; i < cols.size(); ++i) {
      if (cols[i].second == kCallNode) row_node = rows->text(int(i));
      if (cols[i].second == kCallSession) row_session = rows->int64(int(i));
    }
    if (!block.empty() &&
        (row_node != node || row_session != session || block.size() >= kHostBlockRows))
      if (auto st = flush(); !st) return st;
    node = row_node;
    session = row_session;
    ColumnBlock& c = block.open_row();
    for (size_t i = 0; i < cols.size(); ++i) {
      size_t at = cols[i].second;
      int type = sqlite3_column_type(rows->get(), int(i));
      if (type == SQLITE_INTEGER) {
        int64_t x = rows->int64(int(i));
        c.set_int(at, x);
        if (at == kCallId) id = x;
        if (at == kCallTs) ts = x;
        if (at == kCallDur) dur = x;
      } else if (type == SQLITE_TEXT) {
        c.set_text(at, rows->text_view(int(i)));
      } else if (type != SQLITE_NULL) {
        return ingero::make_error("a host row's " + cols[i].first +
                                  " holds a real or a blob, which host events never hold");
      }
    }
    block.close_row(id, ts, ts + dur);
  }
  return flush();
}

}  // namespace

ingero::Status convert_host_rows(Db& db) {
  auto cols = stored_host_columns(db);
  if (!cols) return cols.error();
  if (auto st = db.exec(host_store_ddl()); !st) return st;
  {
    auto ins = db.prepare(host_store_insert_sql());
    if (!ins) return ins.error();
    if (auto st = copy_host_rows(db, *cols, *ins); !st)
      return ingero::make_error("converting host_rows: " + st.error().message);
  }
  return db.exec("DROP INDEX IF EXISTS main.idx_host_rows_ts;\nDROP TABLE main.host_rows;\n" +
                 host_rows_view_sql());
}

}  // namespace ingero::store
