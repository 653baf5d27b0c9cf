#include "store/archive_table.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/packed_fields.h"
#include "store/row_block.h"
#include "store/schema.h"

namespace ingero::store {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Table {
  sqlite3_vtab base{};
  sqlite3* db = nullptr;
  std::string path;
  std::string blocks;  // main.call_blocks or main.run_blocks
  std::string label;   // how errors name a block of it
  std::vector<std::string> cols;
  int id_col = -1, ts_col = -1;
  // call_blocks: the hidden column packed_fields (after `cols`): the decoded-field columns
  // that are not NULL, as pack_fields() gives them (store/event_rows.cc), from these columns.
  std::vector<int> field_cols;
};

// A decoded block being read: its rows in the cursor's bounds, in the order given.
struct Open {
  RowBlock rows;
  std::vector<int> map;  // table column -> block column, -1 where the block lacks it
  int ts = -1, id = -1;  // block columns
  std::vector<uint32_t> order;
  size_t at = 0;
  int64_t key_ts() const { return rows.int64(order[at], size_t(ts)); }
  int64_t key_id() const { return rows.int64(order[at], size_t(id)); }
};

struct Cursor {
  sqlite3_vtab_cursor base{};
  Table* t = nullptr;
  sqlite3_stmt* load = nullptr;  // the block's data
  struct Meta {                  // a block's entry
    int64_t id, first_ts, rows, last_ts, first_id, last_id;
  };
  std::vector<Meta> blocks;
  size_t next_block = 0;
  bool by_ts = false;
  int64_t lo_ts = kMin, hi_ts = kMax, lo_id = kMin, hi_id = kMax;
  std::vector<std::unique_ptr<Open>> heap;  // by (timestamp, id), least on top
  std::unique_ptr<Open> cur;                // the row given: cur->order[cur->at]
  ~Cursor() { sqlite3_finalize(load); }
};

bool later(const std::unique_ptr<Open>& a, const std::unique_ptr<Open>& b) {
  int64_t ta = a->key_ts(), tb = b->key_ts();
  return ta != tb ? ta > tb : a->key_id() > b->key_id();
}

int fail(Cursor* c, const std::string& why) {
  sqlite3_free(c->t->base.zErrMsg);
  c->t->base.zErrMsg = sqlite3_mprintf("%s: %s", c->t->path.c_str(), why.c_str());
  return SQLITE_CORRUPT;
}

int x_connect(sqlite3* db, void*, int argc, const char* const* argv, sqlite3_vtab** out,
              char** err) {
  auto t = std::make_unique<Table>();
  t->db = db;
  const char* file = sqlite3_db_filename(db, "main");
  t->path = file ? file : "";
  // Arguments: the blocks' table, then the columns.
  if (argc < 4 || (std::string(argv[3]) != "call_blocks" && std::string(argv[3]) != "run_blocks")) {
    *err = sqlite3_mprintf("ingero_archive reads call_blocks or run_blocks");
    return SQLITE_ERROR;
  }
  t->blocks = std::string("main.") + argv[3];
  t->label = std::string(argv[3]) == "call_blocks" ? "archive block" : "run archive block";
  std::string decl = "CREATE TABLE x(";
  for (int i = 4; i < argc; ++i) {
    std::string name = argv[i];
    if (name == "id") t->id_col = int(t->cols.size());
    if (name == "timestamp") t->ts_col = int(t->cols.size());
    decl += (i > 4 ? ", " : "") + std::string("\"") + name + "\"";
    t->cols.push_back(std::move(name));
  }
  if (t->blocks == "main.call_blocks") {
    for (const auto& f : field_columns())
      for (size_t i = 0; i < t->cols.size(); ++i)
        if (t->cols[i] == f) t->field_cols.push_back(int(i));
    decl += ", packed_fields HIDDEN";
  }
  decl += ")";
  if (t->id_col < 0 || t->ts_col < 0) {
    *err = sqlite3_mprintf("ingero_archive needs the id and timestamp columns");
    return SQLITE_ERROR;
  }
  if (int rc = sqlite3_declare_vtab(db, decl.c_str()); rc != SQLITE_OK) return rc;
  *out = &t.release()->base;
  return SQLITE_OK;
}

int x_disconnect(sqlite3_vtab* v) {
  delete reinterpret_cast<Table*>(v);
  return SQLITE_OK;
}

char op_code(int op) {
  switch (op) {
    case SQLITE_INDEX_CONSTRAINT_EQ:
      return '=';
    case SQLITE_INDEX_CONSTRAINT_GT:
      return '>';
    case SQLITE_INDEX_CONSTRAINT_GE:
      return 'g';
    case SQLITE_INDEX_CONSTRAINT_LT:
      return '<';
    case SQLITE_INDEX_CONSTRAINT_LE:
      return 'l';
  }
  return 0;
}

int x_best_index(sqlite3_vtab* v, sqlite3_index_info* info) {
  auto* t = reinterpret_cast<Table*>(v);
  std::string plan;
  int argv = 0;
  for (int i = 0; i < info->nConstraint; ++i) {
    const auto& c = info->aConstraint[i];
    char kind = (c.iColumn == -1 || c.iColumn == t->id_col) ? 'I'
                : c.iColumn == t->ts_col                    ? 'T'
                                                            : 0;
    char op = op_code(c.op);
    if (!c.usable || !kind || !op) continue;
    info->aConstraintUsage[i].argvIndex = ++argv;
    plan += kind;
    plan += op;
  }
  auto is_id = [&](int col) { return col == -1 || col == t->id_col; };
  const auto* ob = info->aOrderBy;
  if (info->nOrderBy >= 1 && ob[0].iColumn == t->ts_col && !ob[0].desc &&
      (info->nOrderBy == 1 || (info->nOrderBy == 2 && is_id(ob[1].iColumn) && !ob[1].desc))) {
    info->idxNum = 1;
    info->orderByConsumed = 1;
  } else if (info->nOrderBy == 1 && is_id(ob[0].iColumn) && !ob[0].desc) {
    info->orderByConsumed = 1;
  }
  info->idxStr = sqlite3_mprintf("%s", plan.c_str());
  info->needToFreeIdxStr = 1;
  info->estimatedCost = plan.empty() ? 1e7 : 1e4;
  info->estimatedRows = plan.empty() ? 10000000 : 10000;
  return SQLITE_OK;
}

int x_open(sqlite3_vtab* v, sqlite3_vtab_cursor** out) {
  auto c = std::make_unique<Cursor>();
  c->t = reinterpret_cast<Table*>(v);
  std::string sql = "SELECT data FROM " + c->t->blocks + " WHERE id = ?";
  if (int rc = sqlite3_prepare_v2(c->t->db, sql.c_str(), -1, &c->load, nullptr); rc != SQLITE_OK)
    return rc;
  *out = &c.release()->base;
  return SQLITE_OK;
}

int x_close(sqlite3_vtab_cursor* cur) {
  delete reinterpret_cast<Cursor*>(cur);
  return SQLITE_OK;
}

// Decodes block `m` and keeps its rows in the bounds; null when none are.
int open_block(Cursor* c, const Cursor::Meta& m, std::unique_ptr<Open>& out) {
  sqlite3_reset(c->load);
  sqlite3_bind_int64(c->load, 1, m.id);
  int rc = sqlite3_step(c->load);
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) return fail(c, c->t->label + " " + std::to_string(m.id) + " vanished");
    return rc;
  }
  std::string_view data(static_cast<const char*>(sqlite3_column_blob(c->load, 0)),
                        size_t(sqlite3_column_bytes(c->load, 0)));
  auto rows = RowBlock::decode(data);
  if (!rows) return fail(c, c->t->label + " " + std::to_string(m.id) + ": " + rows.error().message);
  if (int64_t(rows->rows()) != m.rows)
    return fail(c, c->t->label + " " + std::to_string(m.id) + " holds " +
                       std::to_string(rows->rows()) + " rows where its entry says " +
                       std::to_string(m.rows));
  auto o = std::make_unique<Open>();
  o->rows = std::move(*rows);
  std::unordered_map<std::string_view, int> by_name;
  for (size_t i = 0; i < o->rows.columns().size(); ++i) by_name[o->rows.columns()[i]] = int(i);
  for (const auto& name : c->t->cols) {
    auto it = by_name.find(name);
    o->map.push_back(it == by_name.end() ? -1 : it->second);
  }
  o->ts = o->map[size_t(c->t->ts_col)];
  o->id = o->map[size_t(c->t->id_col)];
  if (o->ts < 0 || o->id < 0)
    return fail(c, c->t->label + " " + std::to_string(m.id) + " lacks its id or timestamp");
  // The rows must lie where the entry says: blocks are chosen, and merged in time order, by
  // their entries.
  int64_t min_ts = kMax, max_ts = kMin, min_id = kMax, max_id = kMin;
  for (uint32_t r = 0; r < o->rows.rows(); ++r) {
    int64_t ts = o->rows.int64(r, size_t(o->ts)), id = o->rows.int64(r, size_t(o->id));
    min_ts = std::min(min_ts, ts);
    max_ts = std::max(max_ts, ts);
    min_id = std::min(min_id, id);
    max_id = std::max(max_id, id);
    if (ts >= c->lo_ts && ts <= c->hi_ts && id >= c->lo_id && id <= c->hi_id) o->order.push_back(r);
  }
  if (m.rows > 0 &&
      (min_ts != m.first_ts || max_ts != m.last_ts || min_id != m.first_id || max_id != m.last_id))
    return fail(c, c->t->label + " " + std::to_string(m.id) +
                       ": its rows do not lie in the id and time range its entry says");
  if (c->by_ts) {
    const RowBlock& b = o->rows;
    int ts = o->ts, id = o->id;
    std::stable_sort(o->order.begin(), o->order.end(), [&](uint32_t x, uint32_t y) {
      int64_t tx = b.int64(x, size_t(ts)), ty = b.int64(y, size_t(ts));
      return tx != ty ? tx < ty : b.int64(x, size_t(id)) < b.int64(y, size_t(id));
    });
  }
  if (!o->order.empty()) out = std::move(o);
  return SQLITE_OK;
}

// Makes the next row current: opens every block that could hold a row before the least one
// open (by id: the next block once the open one is done).
int advance(Cursor* c) {
  if (c->cur && ++c->cur->at < c->cur->order.size()) {
    c->heap.push_back(std::move(c->cur));
    std::push_heap(c->heap.begin(), c->heap.end(), later);
  }
  c->cur.reset();
  while (c->next_block < c->blocks.size() &&
         (c->heap.empty() ||
          (c->by_ts && c->blocks[c->next_block].first_ts <= c->heap.front()->key_ts()))) {
    std::unique_ptr<Open> o;
    if (int rc = open_block(c, c->blocks[c->next_block++], o); rc != SQLITE_OK) return rc;
    if (!o) continue;
    c->heap.push_back(std::move(o));
    std::push_heap(c->heap.begin(), c->heap.end(), later);
  }
  if (c->heap.empty()) return SQLITE_OK;
  std::pop_heap(c->heap.begin(), c->heap.end(), later);
  c->cur = std::move(c->heap.back());
  c->heap.pop_back();
  return SQLITE_OK;
}

int x_filter(sqlite3_vtab_cursor* cur, int idx_num, const char* idx_str, int argc,
             sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  c->by_ts = idx_num == 1;
  c->lo_ts = c->lo_id = kMin;
  c->hi_ts = c->hi_id = kMax;
  c->heap.clear();
  c->cur.reset();
  c->blocks.clear();
  c->next_block = 0;
  std::string plan = idx_str ? idx_str : "";
  for (int i = 0; i < argc && size_t(2 * i + 1) < plan.size(); ++i) {
    // A bound that is not an integer is left to SQLite's own check of the rows.
    if (sqlite3_value_numeric_type(argv[i]) != SQLITE_INTEGER) continue;
    int64_t v = sqlite3_value_int64(argv[i]);
    bool ts = plan[size_t(2 * i)] == 'T';
    int64_t& lo = ts ? c->lo_ts : c->lo_id;
    int64_t& hi = ts ? c->hi_ts : c->hi_id;
    switch (plan[size_t(2 * i + 1)]) {
      case '=':
        lo = std::max(lo, v);
        hi = std::min(hi, v);
        break;
      case '>':
        if (v == kMax) hi = kMin;  // nothing is greater
        lo = std::max(lo, v == kMax ? v : v + 1);
        break;
      case 'g':
        lo = std::max(lo, v);
        break;
      case '<':
        if (v == kMin) lo = kMax;  // nothing is less
        hi = std::min(hi, v == kMin ? v : v - 1);
        break;
      case 'l':
        hi = std::min(hi, v);
        break;
    }
  }
  if (c->lo_ts > c->hi_ts || c->lo_id > c->hi_id) return SQLITE_OK;
  sqlite3_stmt* st = nullptr;
  // In id order with an id bound (folding's reads, the shipper's): the entries from
  // idx_*_id alone ('+' keeps the planner off the time index, whose bounds may be open).
  bool by_id = !c->by_ts && (c->lo_id > kMin || c->hi_id < kMax);
  std::string ts = by_id ? "+" : "";
  std::string sql = "SELECT id, first_ts, rows, last_ts, first_id, last_id FROM " + c->t->blocks +
                    " WHERE " + ts + "last_ts >= ?1 AND " + ts +
                    "first_ts <= ?2 AND last_id >= ?3 AND first_id <= ?4 ORDER BY " +
                    std::string(c->by_ts ? "first_ts, first_id" : "last_id");
  int rc = sqlite3_prepare_v2(c->t->db, sql.c_str(), -1, &st, nullptr);
  if (rc != SQLITE_OK) return rc;
  sqlite3_bind_int64(st, 1, c->lo_ts);
  sqlite3_bind_int64(st, 2, c->hi_ts);
  sqlite3_bind_int64(st, 3, c->lo_id);
  sqlite3_bind_int64(st, 4, c->hi_id);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    auto col = [&](int i) { return sqlite3_column_int64(st, i); };
    c->blocks.push_back({col(0), col(1), col(2), col(3), col(4), col(5)});
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return rc;
  return advance(c);
}

int x_next(sqlite3_vtab_cursor* cur) { return advance(reinterpret_cast<Cursor*>(cur)); }

int x_eof(sqlite3_vtab_cursor* cur) { return reinterpret_cast<Cursor*>(cur)->cur == nullptr; }

// The row's decoded fields as pack_fields() packs them (store/packed_fields.h), NULL if none.
// Field columns hold integers; a value of another class converts as SQLite's would.
void result_packed(const Cursor* c, sqlite3_context* ctx) {
  uint8_t buf[256 * kPackedFieldMax];
  size_t k = 0;
  const Open& o = *c->cur;
  size_t row = o.order[o.at];
  const auto& fields = c->t->field_cols;
  for (size_t i = 0; i < fields.size() && i < 256; ++i) {
    int bc = o.map[size_t(fields[i])];
    if (bc < 0) continue;
    int type = o.rows.type(row, size_t(bc));
    if (type == SQLITE_NULL) continue;
    uint64_t x = 0;
    if (type == SQLITE_INTEGER)
      x = uint64_t(o.rows.int64(row, size_t(bc)));
    else if (type == SQLITE_FLOAT)
      x = uint64_t(int64_t(o.rows.real(row, size_t(bc))));
    else if (type == SQLITE_TEXT)
      x = uint64_t(std::strtoll(std::string(o.rows.bytes(row, size_t(bc))).c_str(), nullptr, 10));
    k = put_packed_field(buf, k, uint8_t(i), x);
  }
  if (k == 0)
    sqlite3_result_null(ctx);
  else
    sqlite3_result_blob(ctx, buf, int(k), SQLITE_TRANSIENT);
}

int x_column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  if (size_t(col) == c->t->cols.size()) {  // packed_fields
    result_packed(c, ctx);
    return SQLITE_OK;
  }
  int bc = c->cur->map[size_t(col)];
  if (bc < 0)
    sqlite3_result_null(ctx);
  else
    c->cur->rows.result(ctx, c->cur->order[c->cur->at], size_t(bc));
  return SQLITE_OK;
}

int x_rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  *out = reinterpret_cast<Cursor*>(cur)->cur->key_id();
  return SQLITE_OK;
}

sqlite3_module make_module() {
  sqlite3_module m{};
  m.xCreate = x_connect;
  m.xConnect = x_connect;
  m.xBestIndex = x_best_index;
  m.xDisconnect = x_disconnect;
  m.xDestroy = x_disconnect;
  m.xOpen = x_open;
  m.xClose = x_close;
  m.xFilter = x_filter;
  m.xNext = x_next;
  m.xEof = x_eof;
  m.xColumn = x_column;
  m.xRowid = x_rowid;
  return m;
}

const sqlite3_module kModule = make_module();

}  // namespace

ingero::Status create_archive_table(Db& db, const std::string& name, const std::string& table,
                                    const std::string& blocks) {
  if (sqlite3_create_module_v2(db.handle(), "ingero_archive", &kModule, nullptr, nullptr) !=
      SQLITE_OK)
    return db.last_error("registering the archive module");
  auto cols = db.prepare("SELECT name FROM pragma_table_xinfo(?, 'main') WHERE hidden = 0");
  if (!cols) return cols.error();
  cols->bind(1, std::string_view(table));
  std::string args = blocks;
  while (true) {
    auto r = cols->step();
    if (!r) return r.error();
    if (!*r) break;
    args += ", " + cols->text(0);
  }
  return db.exec("DROP TABLE IF EXISTS temp." + name + ";\nCREATE VIRTUAL TABLE temp." + name +
                 " USING ingero_archive(" + args + ");\n");
}

}  // namespace ingero::store
