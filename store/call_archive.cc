#include "store/call_archive.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "store/archive_fold.h"
#include "store/archive_internal.h"
#include "store/row_block.h"
#include "store/schema.h"
#include "store/tiers.h"

namespace ingero::store {
namespace {

using namespace archive_detail;

// A block being written: its node, entry and data, and with ArchiveOptions::fold what folding
// made of it.
struct Block : BlockEntry {
  std::string node, data;
  std::unique_ptr<FoldedBlock> fold;
};

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
  int64_t considered = 0;  // folding the rows of events went this far
  if (o.fold) {
    auto state = fold_state(db);
    if (!state) return state.error();
    considered = state->last_event_id;
  }
  if (!sel) return sel.error();
  size_t block_rows = o.block_rows, limit = block_rows * o.blocks_per_batch;
  sel->bind(1, last_id).bind(2, read_bound(o, newest)).bind(3, int64_t(limit));
  size_t read = 0;
  std::vector<Block> blocks;
  RowBlock rows(l.stored);
  Block cur;
  ingero::Status folding;
  auto seal = [&] {
    if (cur.rows == 0) return;
    cur.data = rows.encode();
    if (o.fold && folding) {
      auto f = fold_block(db, *o.fold, rows, o.fold_before_ns, considered);
      if (f)
        cur.fold = std::make_unique<FoldedBlock>(std::move(*f));
      else
        folding = f.error();
    }
    blocks.push_back(std::move(cur));
    cur = Block();
    rows = RowBlock(l.stored);
  };
  while (true) {
    auto r = sel->step();
    if (!r) return r.error();
    if (!*r) break;
    std::string n = sel->text(l.node);
    int64_t i = sel->int64(l.id), t = sel->int64(l.ts), e = t + sel->int64(l.end);
    if (o.fold && t >= o.fold_before_ns) break;  // this call and the later ones wait
    if (cur.rows > 0 && (size_t(cur.rows) == block_rows || n != cur.node)) seal();
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
  } else {
    seal();
  }
  if (!folding) return folding.error();
  return blocks;
}

// How many rows after `last_id` read_batch would take, up to a block's worth (with folding,
// none while one of them starts too late to fold).
ingero::Result<int64_t> waiting_rows(Db& db, const Spec& spec, const ArchiveOptions& o,
                                     int64_t newest, int64_t last_id) {
  auto n = db.prepare(std::string("SELECT count(*), max(timestamp) FROM (SELECT timestamp FROM "
                                  "main.") +
                      spec.table + " WHERE id > ? AND id < ? AND " + spec.where +
                      " ORDER BY id LIMIT ?)");
  if (!n) return n.error();
  n->bind(1, last_id).bind(2, read_bound(o, newest)).bind(3, int64_t(o.block_rows));
  auto r = n->step();
  if (!r) return r.error();
  if (o.fold && !n->is_null(1) && n->int64(1) >= o.fold_before_ns) return int64_t(0);
  return n->int64(0);
}

// One entry and its data, through `ins` (an INSERT of a blocks table's columns).
ingero::Status insert_block(Stmt& ins, const std::string& node, const BlockEntry& e,
                            const std::string& data) {
  ins.reset();
  ins.bind(1, std::string_view(node));
  e.bind_entry(ins, 2);
  sqlite3_bind_blob(ins.get(), 9, data.data(), int(data.size()), SQLITE_STATIC);
  if (auto r = ins.step(); !r) return r.error();
  return {};
}

// A block of calls folded as it is archived (store/archive_fold.h): the rows kept into
// call_blocks through `ins`, every row into recent_blocks while its calls are recent (else its
// folded calls are counted as gone), its runs into call_runs. `copies`: a block before it kept
// its copy; so does this one, whatever its age (a block that ended early after one with a long
// call): the views of rows read every call from the first copy on from the copies.
ingero::Status write_folded(Db& db, const Block& b, Stmt& ins, const ArchiveOptions& o,
                            bool& copies, Archived& out) {
  const FoldedBlock& f = *b.fold;
  if (f.kept.rows > 0)
    if (auto st = insert_block(ins, b.node, f.kept, f.kept_data); !st) return st;
  const bool recent = copies = copies || b.end_ts >= o.recent_from_ns;
  if (recent) {
    auto copy = db.prepare(
        "INSERT INTO main.recent_blocks (node, first_id, last_id, first_ts, last_ts, end_ts, "
        "rows, calls, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    if (!copy) return copy.error();
    if (auto st = insert_block(*copy, b.node, b, b.data); !st) return st;
    auto counts =
        db.prepare("INSERT INTO main.recent_folds (block_id, folded_calls, runs) VALUES (?, ?, ?)");
    if (!counts) return counts.error();
    counts->bind(1, int64_t(sqlite3_last_insert_rowid(db.handle())))
        .bind(2, int64_t(f.folded))
        .bind(3, int64_t(f.runs.size()));
    if (auto r = counts->step(); !r) return r.error();
    ++out.recent;
    if (auto st = count_folded(db, 0, 0, 0, b.last_id); !st) return st;
  } else if (auto st = count_folded(db, f.folded, f.runs.size(), b.end_ts, b.last_id); !st) {
    return st;
  }
  auto run = prepare_run_insert(db);
  if (!run) return run.error();
  for (const FoldRun& r : f.runs)
    if (auto st = insert_run(*run, r, recent); !st) return st;
  out.folded += f.folded;
  out.runs += f.runs.size();
  return {};
}

// Inserts the blocks and deletes their rows.
ingero::Status write_batch(Db& db, const Spec& spec, const std::vector<Block>& blocks,
                           const ArchiveOptions& o, Archived& out) {
  auto ins = db.prepare(std::string("INSERT INTO main.") + spec.blocks +
                        " (node, first_id, last_id, first_ts, last_ts, end_ts, rows, calls, "
                        "data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return ins.error();
  auto del = db.prepare(std::string("DELETE FROM main.") + spec.table +
                        " WHERE id BETWEEN ? AND ? AND " + spec.where);
  if (!del) return del.error();
  bool copies = false;  // a copy of rows before these blocks'
  if (o.fold) {
    auto first = recent_from_id(db);
    if (!first) return first.error();
    copies = first->has_value();
  }
  for (const Block& b : blocks) {
    if (b.data.empty()) return ingero::make_error("compressing a block failed");
    if (b.fold) {
      if (auto st = write_folded(db, b, *ins, o, copies, out); !st) return st;
    } else {
      if (auto st = insert_block(*ins, b.node, b, b.data); !st) return st;
    }
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
  BlockEntry b;
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
  // Folded as they are archived, a block's last calls may be in runs and its copy in
  // recent_blocks only.
  std::string last = std::string("SELECT max(last_id) FROM main.") + spec.blocks;
  if (o.fold)
    last = std::string("SELECT max(i) FROM (SELECT max(last_id) AS i FROM main.") + spec.blocks +
           " UNION ALL SELECT max(last_id) FROM main.recent_blocks)";
  auto archived = db.query_int(last);
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
    if (auto st = write_batch(db, spec, *blocks, o, out); !st) return rollback(st.error());
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
