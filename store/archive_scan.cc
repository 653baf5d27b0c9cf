#include "store/archive_scan.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace ingero::store {

std::optional<uint64_t> archived_non_int(const RowBlock& rows, size_t row, int col) {
  switch (rows.type(row, size_t(col))) {
    case SQLITE_FLOAT:
      return uint64_t(int64_t(rows.real(row, size_t(col))));
    case SQLITE_TEXT:
      return uint64_t(std::strtoll(std::string(rows.bytes(row, size_t(col))).c_str(), nullptr, 10));
    case SQLITE_BLOB:
      return 0;
  }
  return std::nullopt;
}

ArchiveScan::ArchiveScan(sqlite3* db, std::string blocks, std::string label, std::string path,
                         std::vector<std::string> cols, size_t ts_col, size_t id_col)
    : ArchiveScan(db, BlockForm{std::move(blocks), "data", "rows", "", true, std::move(label)},
                  std::move(path), std::move(cols), ts_col, id_col) {}

ArchiveScan::ArchiveScan(sqlite3* db, BlockForm form, std::string path,
                         std::vector<std::string> cols, size_t ts_col, size_t id_col)
    : db_(db),
      form_(std::move(form)),
      path_(std::move(path)),
      cols_(std::move(cols)),
      ts_col_(ts_col),
      id_col_(id_col) {}

ArchiveScan::~ArchiveScan() {
  sqlite3_finalize(load_);
  auto& kept = pool();
  if (cur_) spare_.push_back(std::move(cur_));
  for (auto* from : {&spare_, &heap_})
    for (auto& o : *from)
      if (kept.size() < kPooled) kept.push_back(std::move(o));
}

std::vector<std::unique_ptr<ArchiveScan::Open>>& ArchiveScan::pool() {
  thread_local std::vector<std::unique_ptr<Open>> kept;
  return kept;
}

bool ArchiveScan::later(const std::unique_ptr<Open>& a, const std::unique_ptr<Open>& b) {
  int64_t ta = a->key_ts(), tb = b->key_ts();
  return ta != tb ? ta > tb : a->key_id() > b->key_id();
}

int ArchiveScan::fail(const std::string& why) {
  error_ = path_ + ": " + why;
  heap_.clear();
  cur_.reset();
  return SQLITE_CORRUPT;
}

int ArchiveScan::sql_fail(int rc, const std::string& what) {
  // SQLite's own message names the table or index that is missing or damaged.
  error_ = path_ + ": " + what + " of " + form_.table + ": " + sqlite3_errmsg(db_);
  heap_.clear();
  cur_.reset();
  return rc;
}

int ArchiveScan::open_block(const Meta& m, std::unique_ptr<Open>& out) {
  if (!load_) {
    std::string sql = "SELECT " + form_.data + " FROM " + form_.table + " WHERE id = ?";
    if (int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &load_, nullptr); rc != SQLITE_OK)
      return sql_fail(rc, "reading the blocks");
  }
  sqlite3_reset(load_);
  sqlite3_bind_int64(load_, 1, m.id);
  int rc = sqlite3_step(load_);
  std::string name = form_.label + " " + std::to_string(m.id);
  if (rc != SQLITE_ROW)
    return rc == SQLITE_DONE ? fail(name + " vanished") : sql_fail(rc, "reading " + name);
  std::string_view data(static_cast<const char*>(sqlite3_column_blob(load_, 0)),
                        size_t(sqlite3_column_bytes(load_, 0)));
  std::unique_ptr<Open> o;
  if (spare_.empty() && !pool().empty()) {
    spare_.push_back(std::move(pool().back()));
    pool().pop_back();
  }
  if (spare_.empty()) {
    o = std::make_unique<Open>();
  } else {
    o = std::move(spare_.back());
    spare_.pop_back();
    o->map.clear();
    o->views.clear();
    o->live.clear();
    o->order.clear();
    o->at = 0;
  }
  // Only the columns wanted are stored; a scan of a few of a block's ~70 columns reads past
  // the rest.
  if (auto st = RowBlock::decode_into(data, o->rows, 64u << 20, &cols_); !st)
    return fail(name + ": " + st.error().message);
  const RowBlock& rows = o->rows;
  if (int64_t(rows.rows()) != m.rows)
    return fail(name + " holds " + std::to_string(rows.rows()) + " rows where its entry says " +
                std::to_string(m.rows));
  std::unordered_map<std::string_view, int> by_name;
  for (size_t i = 0; i < rows.columns().size(); ++i) by_name[rows.columns()[i]] = int(i);
  for (const auto& col : cols_) {
    auto it = by_name.find(col);
    int bc = it == by_name.end() ? -1 : it->second;
    if (bc >= 0 && !rows.null_column(size_t(bc))) o->live.push_back(uint32_t(o->map.size()));
    o->map.push_back(bc);
    o->views.push_back(bc < 0 ? RowBlock::ColumnView{} : rows.view(size_t(bc)));
  }
  o->ts = o->map[ts_col_];
  o->id = o->map[id_col_];
  if (o->ts < 0 || o->id < 0) return fail(name + " lacks its id or timestamp");
  // The rows must lie where the entry says: blocks are chosen, and merged in time order, by
  // their entries.
  int64_t min_ts = kMax, max_ts = kMin, min_id = kMax, max_id = kMin;
  // Whether the rows taken are in (timestamp, id) order already: a block written as events
  // came is nearly always, and then needs no sort.
  bool in_order = true;
  int64_t last_ts = kMin, last_id = kMin;
  for (uint32_t r = 0; r < rows.rows(); ++r) {
    int64_t ts = rows.int64(r, size_t(o->ts)), id = rows.int64(r, size_t(o->id));
    min_ts = std::min(min_ts, ts);
    max_ts = std::max(max_ts, ts);
    min_id = std::min(min_id, id);
    max_id = std::max(max_id, id);
    if (ts >= b_.lo_ts && ts <= b_.hi_ts && id >= b_.lo_id && id <= b_.hi_id) {
      if (ts < last_ts || (ts == last_ts && id < last_id)) in_order = false;
      last_ts = ts;
      last_id = id;
      o->order.push_back(r);
    }
  }
  bool off = form_.exact ? (min_ts != m.first_ts || max_ts != m.last_ts || min_id != m.first_id ||
                            max_id != m.last_id)
                         : (min_ts < m.first_ts || max_ts > m.last_ts || min_id < m.first_id ||
                            max_id > m.last_id);
  if (m.rows > 0 && off)
    return fail(name + ": its rows do not lie in the id and time range its entry says");
  if (by_ts_ && !in_order) sort_rows(*o);
  if (o->order.empty())
    spare_.push_back(std::move(o));
  else
    out = std::move(o);
  return SQLITE_OK;
}

void ArchiveScan::sort_rows(Open& o) {
  // A block's rows come as a few stretches each in order (each ring's records, the switches
  // and the samples apart): the stretches are merged, a pair at a time, where a sort of every
  // row was 5% of `explain`.
  struct Key {
    int64_t ts, id;
    uint32_t row;
    bool operator<(const Key& k) const { return ts != k.ts ? ts < k.ts : id < k.id; }
  };
  static thread_local std::vector<Key> keys, into;
  static thread_local std::vector<size_t> starts, next;
  keys.clear();
  starts.assign(1, 0);
  for (uint32_t r : o.order) {
    keys.push_back({o.rows.int64(r, size_t(o.ts)), o.rows.int64(r, size_t(o.id)), r});
    if (keys.size() > 1 && keys.back() < keys[keys.size() - 2]) starts.push_back(keys.size() - 1);
  }
  if (starts.size() > 64) {  // no stretches to speak of
    std::sort(keys.begin(), keys.end());
  } else {
    into.resize(keys.size());
    while (starts.size() > 1) {
      next.clear();
      for (size_t i = 0; i < starts.size(); i += 2) {
        size_t a = starts[i], b = i + 1 < starts.size() ? starts[i + 1] : keys.size();
        size_t e = i + 2 < starts.size() ? starts[i + 2] : keys.size();
        std::merge(keys.begin() + ptrdiff_t(a), keys.begin() + ptrdiff_t(b),
                   keys.begin() + ptrdiff_t(b), keys.begin() + ptrdiff_t(e),
                   into.begin() + ptrdiff_t(a));
        next.push_back(a);
      }
      keys.swap(into);
      starts.swap(next);
    }
  }
  for (size_t i = 0; i < keys.size(); ++i) o.order[i] = keys[i].row;
}

int ArchiveScan::advance() {
  if (cur_ && ++cur_->at < cur_->order.size()) {
    // Most rows follow their block's previous row: the block stays current, and the heap is
    // not touched, unless another open block or the next block to open holds an earlier row
    // (keys are unique: the order is the heap's).
    bool others_later = heap_.empty() || later(heap_.front(), cur_);
    bool opens =
        by_ts_ && next_block_ < metas_.size() && metas_[next_block_].first_ts <= cur_->key_ts();
    if (others_later && !opens) return SQLITE_OK;
    heap_.push_back(std::move(cur_));
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  if (cur_) spare_.push_back(std::move(cur_));
  while (next_block_ < metas_.size() &&
         (heap_.empty() || (by_ts_ && metas_[next_block_].first_ts <= heap_.front()->key_ts()))) {
    std::unique_ptr<Open> o;
    if (int rc = open_block(metas_[next_block_++], o); rc != SQLITE_OK) return rc;
    if (!o) continue;
    heap_.push_back(std::move(o));
    std::push_heap(heap_.begin(), heap_.end(), later);
  }
  if (heap_.empty()) return SQLITE_OK;
  std::pop_heap(heap_.begin(), heap_.end(), later);
  cur_ = std::move(heap_.back());
  heap_.pop_back();
  return SQLITE_OK;
}

int ArchiveScan::next() { return advance(); }

int ArchiveScan::start(const Bounds& b, bool by_ts) {
  if (!snapshot_) snapshot_.emplace(db_);
  b_ = b;
  by_ts_ = by_ts;
  error_.clear();
  while (!heap_.empty()) {
    spare_.push_back(std::move(heap_.back()));
    heap_.pop_back();
  }
  if (cur_) spare_.push_back(std::move(cur_));
  metas_.clear();
  next_block_ = 0;
  if (b.lo_ts > b.hi_ts || b.lo_id > b.hi_id) return SQLITE_OK;
  // In id order with an id bound (folding's reads, the shipper's): the entries from
  // idx_*_id alone ('+' keeps the planner off the time index, whose bounds may be open).
  bool by_id = !by_ts && (b.lo_id > kMin || b.hi_id < kMax);
  std::string plus = by_id ? "+" : "";
  // A block that holds a row at or after lo_ts begins at most max_span before it.
  int64_t earliest = kMin;
  if (by_ts && b.max_span >= 0 && b.max_span < kMax && b.lo_ts >= kMin + b.max_span)
    earliest = b.lo_ts - b.max_span;
  std::string sql =
      "SELECT id, first_ts, " + form_.rows + ", last_ts, first_id, last_id FROM " + form_.table +
      " WHERE " + (form_.filter.empty() ? "" : "(" + form_.filter + ") AND ") + plus +
      "last_ts >= ?1 AND " + plus + "first_ts <= ?2 AND last_id >= ?3 AND first_id <= ?4" +
      (earliest > kMin ? " AND first_ts >= ?5" : "") + " ORDER BY " +
      std::string(by_ts ? "first_ts, first_id" : "last_id");
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr);
  if (rc != SQLITE_OK) return sql_fail(rc, "listing the blocks");
  sqlite3_bind_int64(st, 1, b.lo_ts);
  sqlite3_bind_int64(st, 2, b.hi_ts);
  sqlite3_bind_int64(st, 3, b.lo_id);
  sqlite3_bind_int64(st, 4, b.hi_id);
  if (earliest > kMin) sqlite3_bind_int64(st, 5, earliest);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    auto col = [&](int i) { return sqlite3_column_int64(st, i); };
    metas_.push_back({col(0), col(1), col(2), col(3), col(4), col(5)});
  }
  if (rc != SQLITE_DONE) rc = sql_fail(rc, "listing the blocks");
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return rc;
  return advance();
}

}  // namespace ingero::store
