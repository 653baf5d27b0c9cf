#include "store/archive_table.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "store/archive_scan.h"

namespace ingero::store {
namespace {

// The columns of calls, runs and host events that hold text; every other one is an integer.
bool is_text_column(const std::string& name) {
  for (const char* t : {"node", "comm", "peer_comm", "funcs", "detail", "saddr", "daddr"})
    if (name == t) return true;
  return false;
}

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Table {
  sqlite3_vtab base{};
  sqlite3* db = nullptr;
  std::string path;
  BlockForm form;  // which blocks, which of their values
  std::vector<std::string> cols;
  int id_col = -1, ts_col = -1;
};

struct Cursor {
  sqlite3_vtab_cursor base{};
  Table* t = nullptr;
  std::unique_ptr<ArchiveScan> scan;
};

// SQLite's code for what the scan reported; its message (a damaged block, a table missing)
// goes to the table.
int report(Cursor* c, int rc) {
  if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE && !c->scan->error().empty()) {
    sqlite3_free(c->t->base.zErrMsg);
    c->t->base.zErrMsg = sqlite3_mprintf("%s", c->scan->error().c_str());
  }
  return rc;
}

int x_connect(sqlite3* db, void* aux, int argc, const char* const* argv, sqlite3_vtab** out,
              char** err) {
  auto t = std::make_unique<Table>();
  t->db = db;
  const char* file = sqlite3_db_filename(db, "main");
  t->path = file ? file : "";
  std::vector<std::string> names;
  if (aux) {  // an eponymous table of the call store: its form and columns are fixed
    const auto* e = static_cast<const EponymousBlocks*>(aux);
    t->form = e->form;
    names = e->columns;
  } else {
    // Arguments: the blocks' table, then the columns.
    std::string blocks = argc >= 4 ? argv[3] : "";
    if (blocks != "call_blocks" && blocks != "run_blocks" && blocks != "recent_blocks") {
      *err = sqlite3_mprintf("ingero_archive reads call_blocks, run_blocks or recent_blocks");
      return SQLITE_ERROR;
    }
    t->form = {"main." + blocks,
               "data",
               "rows",
               "",
               true,
               blocks == "call_blocks"  ? "archive block"
               : blocks == "run_blocks" ? "run archive block"
                                        : "recent archive block"};
    for (int i = 4; i < argc; ++i) names.emplace_back(argv[i]);
  }
  // Each column with its type, as the tables of rows had them: without one a column has no
  // affinity, and `pid = '4242'` (a number quoted, as agents write SQL) matched nothing, where
  // a file of rows compared it as the number.
  std::string decl = "CREATE TABLE x(";
  for (auto& name : names) {
    if (name == "id") t->id_col = int(t->cols.size());
    if (name == "timestamp") t->ts_col = int(t->cols.size());
    decl += (t->cols.empty() ? "" : ", ") + std::string("\"") + name + "\" " +
            (is_text_column(name) ? "TEXT" : "INTEGER");
    t->cols.push_back(std::move(name));
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
  Table* t = c->t = reinterpret_cast<Table*>(v);
  c->scan = std::make_unique<ArchiveScan>(t->db, t->form, t->path, t->cols, size_t(t->ts_col),
                                          size_t(t->id_col));
  *out = &c.release()->base;
  return SQLITE_OK;
}

int x_close(sqlite3_vtab_cursor* cur) {
  delete reinterpret_cast<Cursor*>(cur);
  return SQLITE_OK;
}

int x_filter(sqlite3_vtab_cursor* cur, int idx_num, const char* idx_str, int argc,
             sqlite3_value** argv) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  ArchiveScan::Bounds b;
  std::string plan = idx_str ? idx_str : "";
  for (int i = 0; i < argc && size_t(2 * i + 1) < plan.size(); ++i) {
    // A bound that is not an integer is left to SQLite's own check of the rows.
    if (sqlite3_value_numeric_type(argv[i]) != SQLITE_INTEGER) continue;
    int64_t v = sqlite3_value_int64(argv[i]);
    bool ts = plan[size_t(2 * i)] == 'T';
    int64_t& lo = ts ? b.lo_ts : b.lo_id;
    int64_t& hi = ts ? b.hi_ts : b.hi_id;
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
  return report(c, c->scan->start(b, idx_num == 1));
}

int x_next(sqlite3_vtab_cursor* cur) {
  auto* c = reinterpret_cast<Cursor*>(cur);
  return report(c, c->scan->next());
}

int x_eof(sqlite3_vtab_cursor* cur) { return reinterpret_cast<Cursor*>(cur)->scan->eof(); }

int x_column(sqlite3_vtab_cursor* cur, sqlite3_context* ctx, int col) {
  const ArchiveScan& s = *reinterpret_cast<Cursor*>(cur)->scan;
  int bc = s.column(size_t(col));
  if (bc < 0)
    sqlite3_result_null(ctx);
  else
    s.rows().result(ctx, s.row(), size_t(bc));
  return SQLITE_OK;
}

int x_rowid(sqlite3_vtab_cursor* cur, sqlite3_int64* out) {
  *out = reinterpret_cast<Cursor*>(cur)->scan->id();
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

sqlite3_module make_eponymous_module() {
  sqlite3_module m = make_module();
  m.xCreate = nullptr;  // eponymous only: it exists in every schema, and CREATE cannot name it
  m.xDestroy = nullptr;
  return m;
}

const sqlite3_module kEponymousModule = make_eponymous_module();

}  // namespace

int register_eponymous_blocks(sqlite3* db, const char* name, const EponymousBlocks* blocks) {
  return sqlite3_create_module_v2(db, name, &kEponymousModule, const_cast<EponymousBlocks*>(blocks),
                                  nullptr);
}

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
