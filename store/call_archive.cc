#include "store/call_archive.h"

#include <algorithm>
#include <string>
#include <vector>

#include "store/archive_table.h"
#include "store/row_block.h"
#include "store/schema.h"

namespace ingero::store {
namespace {

// Blocks written per transaction.
constexpr size_t kBlocksPerBatch = 64;

// A table whose rows are archived: its blocks' table, the virtual table reading them back
// and the rows moved.
struct Spec {
  const char* table;    // main.<table>: the rows
  const char* blocks;   // main.<blocks>
  const char* archive;  // temp.<archive>
  const char* where;    // which of the table's rows
  const char* end;      // where a row ends
  const char* weight;   // the calls a row stands for
};
constexpr Spec kCalls = {
    "events",         "call_blocks",
    "archived_calls", "source IN (SELECT id FROM sources WHERE vendor <> 'host')",
    "duration",       ""};
constexpr Spec kRuns = {"call_runs", "run_blocks", "archived_runs", "1", "span_ns", "calls"};

struct Block {
  std::string node, data;
  int64_t first_id = 0, last_id = 0, first_ts = 0, last_ts = 0, end_ts = 0, rows = 0, calls = 0;
  // Takes a row into the entry's ranges (rows come in id order).
  void add(int64_t id, int64_t ts, int64_t end) {
    if (rows == 0) first_id = id, first_ts = last_ts = ts, end_ts = end;
    last_id = id;
    first_ts = std::min(first_ts, ts);
    last_ts = std::max(last_ts, ts);
    end_ts = std::max(end_ts, end);
    ++rows;
  }
  // Binds first_id, last_id, first_ts, last_ts, end_ts, rows and calls from parameter `at` on.
  void bind_entry(Stmt& st, int at) const {
    st.bind(at, first_id)
        .bind(at + 1, last_id)
        .bind(at + 2, first_ts)
        .bind(at + 3, last_ts)
        .bind(at + 4, end_ts)
        .bind(at + 5, rows)
        .bind(at + 6, calls);
  }
};

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

}  // namespace

bool has_call_archive(Db& db) { return has_blocks(db, kCalls.blocks); }
bool has_run_archive(Db& db) { return has_blocks(db, kRuns.blocks); }

std::string node_names_sql(Db& db) {
  if (!db.table_exists("call_blocks")) return "SELECT DISTINCT node FROM main.events ORDER BY node";
  return "SELECT node FROM main.events UNION SELECT node FROM main.call_blocks ORDER BY 1";
}

std::string first_timestamp_sql(Db& db) {
  if (!db.table_exists("call_blocks")) return "SELECT min(timestamp) FROM main.events";
  return "SELECT min(t) FROM (SELECT min(timestamp) AS t FROM main.events UNION ALL "
         "SELECT min(first_ts) FROM main.call_blocks)";
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

// temp.<archive> and the TEMP view named like the table over both.
ingero::Status install(Db& db, const Spec& spec) {
  if (!has_blocks(db, spec.blocks) || db.table_exists(spec.archive, "temp")) return {};
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
  return db.exec(std::string("DROP VIEW IF EXISTS temp.") + spec.table + ";\nCREATE TEMP VIEW " +
                 spec.table + " AS SELECT * FROM main." + spec.table + " UNION ALL SELECT " +
                 select + " FROM temp." + spec.archive + ";\n");
}

}  // namespace

ingero::Status install_call_archive(Db& db) {
  if (auto st = install(db, kCalls); !st) return st;
  return install(db, kRuns);
}

namespace {

// What archiving reads of a table: its stored columns, and where the ones it needs are.
struct Layout {
  std::vector<std::string> stored;
  std::string list;  // the stored columns, quoted, for a SELECT
  int node = -1, id = -1, ts = -1, end = -1, weight = -1;
};

ingero::Result<Layout> layout_of(Db& db, const Spec& spec) {
  auto cols = table_columns(db, spec.table);
  if (!cols) return cols.error();
  Layout l;
  for (const auto& [name, generated] : *cols) {
    if (generated) continue;
    int i = int(l.stored.size());
    if (name == "node") l.node = i;
    if (name == "id") l.id = i;
    if (name == "timestamp") l.ts = i;
    if (name == spec.end) l.end = i;
    if (name == spec.weight) l.weight = i;
    l.stored.push_back(name);
    l.list += (l.list.empty() ? "" : ", ") + quoted(name);
  }
  if (l.node < 0 || l.id < 0 || l.ts < 0 || l.end < 0 || (*spec.weight && l.weight < 0))
    return ingero::make_error(db.path() + ": " + spec.table + " lacks a column archiving needs");
  return l;
}

// The id archiving reads below: the table's newest row stays, and rows above `o.through_id`.
int64_t read_bound(const ArchiveOptions& o, int64_t newest) {
  return std::min(newest, o.through_id == INT64_MAX ? INT64_MAX : o.through_id + 1);
}

// The next batch of rows after `last_id` (and before `newest`), encoded into blocks of at most
// `o.block_rows` rows of one node; `last_id` moves to the last row read. With
// `o.whole_blocks`, a last block short of `o.block_rows` rows is left for a later batch and
// `more` says whether the read stopped at its limit.
ingero::Result<std::vector<Block>> read_batch(Db& db, const Spec& spec, const Layout& l,
                                              const ArchiveOptions& o, int64_t newest,
                                              int64_t& last_id, bool& more) {
  auto sel = db.prepare("SELECT " + l.list + " FROM main." + spec.table +
                        " WHERE id > ? AND id < ? AND " + spec.where + " ORDER BY id LIMIT ?");
  if (!sel) return sel.error();
  size_t block_rows = o.block_rows, limit = block_rows * o.blocks_per_batch;
  sel->bind(1, last_id).bind(2, read_bound(o, newest)).bind(3, int64_t(limit));
  size_t read = 0;
  std::vector<Block> blocks;
  RowBlock rows(l.stored);
  Block cur;
  auto seal = [&] {
    if (cur.rows == 0) return;
    cur.data = rows.encode();
    blocks.push_back(std::move(cur));
    cur = Block();
    rows = RowBlock(l.stored);
  };
  while (true) {
    auto r = sel->step();
    if (!r) return r.error();
    if (!*r) break;
    std::string n = sel->text(l.node);
    if (cur.rows > 0 && (size_t(cur.rows) == block_rows || n != cur.node)) seal();
    int64_t i = sel->int64(l.id), t = sel->int64(l.ts), e = t + sel->int64(l.end);
    if (cur.rows == 0) cur.node = n;
    cur.add(i, t, e);
    last_id = i;
    cur.calls += l.weight < 0 ? 1 : sel->int64(l.weight);
    rows.add_row(sel->get());
    ++read;
  }
  more = read == limit;
  if (o.whole_blocks && size_t(cur.rows) < block_rows) {
    if (cur.rows > 0) last_id = cur.first_id - 1;  // read again by the next batch
    return blocks;
  }
  seal();
  return blocks;
}

// How many rows after `last_id` read_batch would take, up to a block's worth.
ingero::Result<int64_t> waiting_rows(Db& db, const Spec& spec, const ArchiveOptions& o,
                                     int64_t newest, int64_t last_id) {
  auto n = db.prepare(std::string("SELECT count(*) FROM (SELECT 1 FROM main.") + spec.table +
                      " WHERE id > ? AND id < ? AND " + spec.where + " LIMIT ?)");
  if (!n) return n.error();
  n->bind(1, last_id).bind(2, read_bound(o, newest)).bind(3, int64_t(o.block_rows));
  auto r = n->step();
  if (!r) return r.error();
  return n->int64(0);
}

// Inserts the blocks and deletes their rows.
ingero::Status write_batch(Db& db, const Spec& spec, const std::vector<Block>& blocks,
                           Archived& out) {
  auto ins = db.prepare(std::string("INSERT INTO main.") + spec.blocks +
                        " (node, first_id, last_id, first_ts, last_ts, end_ts, rows, calls, "
                        "data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return ins.error();
  auto del = db.prepare(std::string("DELETE FROM main.") + spec.table +
                        " WHERE id BETWEEN ? AND ? AND " + spec.where);
  if (!del) return del.error();
  for (const Block& b : blocks) {
    if (b.data.empty()) return ingero::make_error("compressing a block failed");
    ins->reset();
    ins->bind(1, std::string_view(b.node));
    b.bind_entry(*ins, 2);
    sqlite3_bind_blob(ins->get(), 9, b.data.data(), int(b.data.size()), SQLITE_STATIC);
    if (auto r = ins->step(); !r) return r.error();
    del->reset();
    del->bind(1, b.first_id).bind(2, b.last_id);
    if (auto r = del->step(); !r) return r.error();
    if (sqlite3_changes(db.handle()) != b.rows)
      return ingero::make_error(db.path() + ": rows changed while archiving");
    out.rows += uint64_t(b.rows);
    ++out.blocks;
  }
  return {};
}

// Block `block` (its stored `data`) without the rows whose id is in `drop` (sorted): rewritten
// with its entry, or deleted when no row is left. Returns how many rows it dropped.
ingero::Result<uint64_t> rewrite_block(Db& db, int64_t block, std::string_view data,
                                       const std::vector<int64_t>& drop) {
  auto rows = RowBlock::decode(data);
  if (!rows)
    return ingero::make_error("archive block " + std::to_string(block) + ": " +
                              rows.error().message);
  const auto& names = rows->columns();
  auto col = [&](const char* n) {
    return size_t(std::find(names.begin(), names.end(), n) - names.begin());
  };
  size_t id = col("id"), ts = col("timestamp"), dur = col(kCalls.end);
  if (id == names.size() || ts == names.size() || dur == names.size())
    return ingero::make_error("archive block " + std::to_string(block) + " lacks id or time");
  RowBlock kept(names);
  Block b;
  uint64_t dropped = 0;
  for (size_t r = 0; r < rows->rows(); ++r) {
    int64_t i = rows->int64(r, id);
    if (std::binary_search(drop.begin(), drop.end(), i)) {
      ++dropped;
      continue;
    }
    int64_t t = rows->int64(r, ts);
    b.add(i, t, t + rows->int64(r, dur));
    kept.add_row(*rows, r);
  }
  b.calls = b.rows;
  if (dropped == 0) return dropped;
  if (b.rows == 0) {
    auto del = db.prepare("DELETE FROM main.call_blocks WHERE id = ?");
    if (!del) return del.error();
    del->bind(1, block);
    if (auto r = del->step(); !r) return r.error();
    return dropped;
  }
  std::string packed = kept.encode();
  if (packed.empty()) return ingero::make_error("compressing a block failed");
  auto upd = db.prepare(
      "UPDATE main.call_blocks SET first_id = ?, last_id = ?, first_ts = ?, last_ts = ?, "
      "end_ts = ?, rows = ?, calls = ?, data = ? WHERE id = ?");
  if (!upd) return upd.error();
  b.bind_entry(*upd, 1);
  sqlite3_bind_blob(upd->get(), 8, packed.data(), int(packed.size()), SQLITE_STATIC);
  upd->bind(9, block);
  if (auto r = upd->step(); !r) return r.error();
  return dropped;
}

ingero::Result<Archived> archive_rows(Db& db, const Spec& spec, const ArchiveOptions& o) {
  Archived out;
  if (!db.table_exists(spec.table) || !db.table_exists(spec.blocks)) return out;
  auto l = layout_of(db, spec);
  if (!l) return l.error();
  // The newest row stays: SQLite numbers the next row max(id) + 1, which must not be an
  // archived row's id.
  auto newest = db.query_int(std::string("SELECT max(id) FROM main.") + spec.table);
  if (!newest) return newest.error();
  // Every row of the table below its blocks' last id is archived (blocks take whole runs of
  // rows in id order; folding only removes rows from them): reading from there, a pass does not
  // walk the host events that stay rows ahead of it, millions in an hour.
  auto archived = db.query_int(std::string("SELECT max(last_id) FROM main.") + spec.blocks);
  if (!archived) return archived.error();
  int64_t last_id = archived->value_or(INT64_MIN);
  while (true) {
    // A batch is read and written in one write transaction: a trace folding or applying
    // retention to the same file takes turns with it, and no row changes in between.
    if (auto st = db.exec("BEGIN IMMEDIATE"); !st) return st.error();
    auto rollback = [&](const ingero::Error& e) {
      (void)db.exec("ROLLBACK");
      return e;
    };
    if (o.whole_blocks) {  // a block's worth waiting? (counting is cheap; reading is not)
      auto n = waiting_rows(db, spec, o, newest->value_or(INT64_MIN), last_id);
      if (!n) return rollback(n.error());
      if (*n < int64_t(o.block_rows)) {
        (void)db.exec("ROLLBACK");
        return out;
      }
    }
    bool more = false;
    auto blocks = read_batch(db, spec, *l, o, newest->value_or(INT64_MIN), last_id, more);
    if (!blocks) return rollback(blocks.error());
    if (blocks->empty()) {
      (void)db.exec("ROLLBACK");
      return out;
    }
    if (auto st = write_batch(db, spec, *blocks, out); !st) return rollback(st.error());
    if (auto st = db.exec("COMMIT"); !st) return rollback(st.error());
    if (o.one_batch) {
      out.more = more;
      return out;
    }
  }
}

}  // namespace

ingero::Result<Archived> archive_calls(Db& db, const ArchiveOptions& o) {
  return archive_rows(db, kCalls, o);
}

ingero::Result<Archived> archive_runs(Db& db, const ArchiveOptions& o) {
  return archive_rows(db, kRuns, o);
}

ingero::Status install_archive_reader(Db& db) {
  if (!db.table_exists(kCalls.blocks)) return {};
  if (db.table_exists(kCalls.archive, "temp")) return {};
  return create_archive_table(db, kCalls.archive, kCalls.table, kCalls.blocks);
}

ingero::Status drop_archived_calls(Db& db, std::vector<int64_t> ids) {
  if (ids.empty()) return {};
  std::sort(ids.begin(), ids.end());
  auto sel = db.prepare(
      "SELECT id, first_id, last_id, data FROM main.call_blocks WHERE last_id >= ? AND "
      "first_id <= ? ORDER BY last_id");
  if (!sel) return sel.error();
  sel->bind(1, ids.front()).bind(2, ids.back());
  struct Hit {
    int64_t block;
    std::string data;
    std::vector<int64_t> ids;
  };
  std::vector<Hit> hits;
  while (true) {
    auto r = sel->step();
    if (!r) return r.error();
    if (!*r) break;
    auto lo = std::lower_bound(ids.begin(), ids.end(), sel->int64(1));
    auto hi = std::upper_bound(lo, ids.end(), sel->int64(2));
    if (lo == hi) continue;
    const void* p = sqlite3_column_blob(sel->get(), 3);
    std::string data(static_cast<const char*>(p ? p : ""),
                     size_t(sqlite3_column_bytes(sel->get(), 3)));
    hits.push_back({sel->int64(0), std::move(data), {lo, hi}});
  }
  sel->reset();
  uint64_t found = 0;
  for (const Hit& h : hits) {
    auto st = rewrite_block(db, h.block, h.data, h.ids);
    if (!st) return st.error();
    found += *st;
  }
  if (found != ids.size())
    return ingero::make_error(db.path() + ": " + std::to_string(ids.size() - found) +
                              " archived calls to fold are in no archive block");
  return {};
}

}  // namespace ingero::store
