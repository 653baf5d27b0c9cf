#include "fleet/block_rows.h"

#include <algorithm>

#include "store/archive_scan.h"
#include "store/call_block.h"
#include "store/call_store.h"
#include "store/read_snapshot.h"
#include "store/schema.h"

namespace ingero::fleet {
namespace {

// One cell of a decoded block, as the SQL path hands SQLite's value to SpoolRow.
void put_cell(RowBinary& rb, ChType t, const store::RowBlock& rows, size_t r, size_t c) {
  switch (rows.type(r, c)) {
    case SQLITE_INTEGER:
      rb.integer(t, rows.int64(r, c));
      break;
    case SQLITE_NULL:
      rb.null(t);
      break;
    case SQLITE_FLOAT:
      rb.real(t, rows.real(r, c));
      break;
    default:
      rb.text(t, rows.bytes(r, c));
  }
}

}  // namespace

ingero::Result<std::unique_ptr<BlockRows>> BlockRows::create(Spool& spool, const TableSpec& t) {
  if (!store::has_call_store(spool.db()))
    return ingero::make_error(spool.path() + ": no call blocks (schema before 10)");
  auto types = column_types(t);
  if (!types) return types.error();
  std::unique_ptr<BlockRows> br(new BlockRows(spool, t));
  br->types_ = std::move(*types);
  const auto& block = store::call_column_names();
  auto want = [&](const std::string& name) {
    auto it = std::find(br->wanted_.begin(), br->wanted_.end(), name);
    if (it != br->wanted_.end()) return size_t(it - br->wanted_.begin());
    br->wanted_.push_back(name);
    return br->wanted_.size() - 1;
  };
  br->w_id_ = want("id");
  br->w_ts_ = want("timestamp");
  br->w_source_ = want("source");
  br->w_op_ = want("op");
  br->w_session_ = want("session_id");
  br->w_nested_source_ = want("nested_source");
  br->w_nested_op_ = want("nested_op");
  static const std::map<std::string, From, std::less<>> kKnown = {
      {":file_start", From::kFileStart}, {"coalesce(ss.started_at, 0)", From::kSessionStart},
      {"src.vendor", From::kVendor},     {"src.api", From::kApi},
      {"o.kind", From::kKind},           {"o.name", From::kOp},
      {kNestedOpName, From::kNestedOp}};
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const ColumnSpec& c = t.columns[i];
    Column col;
    col.type = br->types_[i];
    if (auto k = kKnown.find(c.source); k != kKnown.end()) {
      col.from = k->second;
    } else if (c.source.rfind("e.", 0) == 0) {
      std::string name = c.source.substr(2);
      for (const auto& g : store::kEventGeneratedColumns)
        if (name == g.name)
          return ingero::make_error("events." + c.name + " reads the generated column " + name);
      if (std::find(block.begin(), block.end(), name) != block.end()) {
        col.from = From::kBlock;
        col.wanted = want(name);
      }
      // else: a column calls do not have (detail, saddr, daddr; one newer than the file):
      // NULL, as the file's `events` view and Spool::select give it.
    } else {
      return ingero::make_error("events." + c.name + " is read as '" + c.source +
                                "', which call blocks cannot give");
    }
    br->plan_.push_back(col);
  }
  br->day_col_ = t.column_index(t.day_column);
  br->id_col_ = t.column_index("src_id");
  auto is_block = [&](int col, size_t w) {
    return col >= 0 && br->plan_[size_t(col)].from == From::kBlock &&
           br->plan_[size_t(col)].wanted == w;
  };
  if (!is_block(br->id_col_, br->w_id_) ||
      (br->day_col_ >= 0 && !is_block(br->day_col_, br->w_ts_)))
    return ingero::make_error("events: src_id and " + t.day_column +
                              " are not the calls' id and timestamp");
  return br;
}

ingero::Status BlockRows::load_names() {
  store::Db& db = spool_.db();
  auto read = [&](const char* sql, const std::function<void(store::Stmt&)>& fn) -> ingero::Status {
    auto st = db.prepare(sql);
    if (!st) return ingero::make_error(spool_.path() + ": " + st.error().message);
    while (true) {
      auto r = st->step();
      if (!r) return ingero::make_error(spool_.path() + ": " + r.error().message);
      if (!*r) return {};
      fn(*st);
    }
  };
  sources_.clear();
  ops_.clear();
  sessions_.clear();
  if (auto s = read("SELECT id, vendor, api FROM sources",
                    [&](store::Stmt& st) {
                      sources_[st.int64(0)] = {st.text(1), st.text(2)};
                    });
      !s)
    return s;
  if (auto s = read("SELECT source_id, op_id, kind, name FROM ops",
                    [&](store::Stmt& st) {
                      ops_[{st.int64(0), st.int64(1)}] = {st.text(2), st.text(3)};
                    });
      !s)
    return s;
  return read("SELECT id, started_at FROM sessions",
              [&](store::Stmt& st) { sessions_[st.int64(0)] = st.int64(1); });
}

ingero::Status BlockRows::host_rows(int64_t after, size_t limit) {
  host_index_.clear();
  host_.clear();
  return spool_.select(
      t_, "WHERE e.id > :after ORDER BY e.id LIMIT :limit",
      {{":after", after}, {":limit", int64_t(limit)}},
      [&](const SpoolRow& r) {
        size_t begin = host_.size();
        r.append_row_binary(host_, types_);
        host_index_.push_back(
            {r.int64(id_col_), day_col_ >= 0 ? r.int64(day_col_) : 0, begin, host_.size()});
        return true;
      },
      "main.host_rows e");
}

void BlockRows::put_call(const store::ArchiveScan& scan, RowBinary& rb, NameCache& names) const {
  const store::RowBlock& rows = scan.rows();
  const size_t r = scan.row();
  auto block_int = [&](size_t w) {
    int bc = scan.column(w);
    return bc < 0 ? 0 : rows.int64(r, size_t(bc));
  };
  int64_t s = block_int(w_source_), o = block_int(w_op_);
  if (s != names.source_id) {
    auto it = sources_.find(s);
    names.source = it == sources_.end() ? &kNoName : &it->second;
    names.source_id = s;
    names.op_id = -1;
  }
  if (o != names.op_id) {
    auto it = ops_.find({s, o});
    names.op = it == ops_.end() ? &kNoName : &it->second;
    names.op_id = o;
  }
  for (const Column& c : plan_) {
    switch (c.from) {
      case From::kBlock: {
        int bc = scan.column(c.wanted);
        if (bc < 0)
          rb.null(c.type);
        else
          put_cell(rb, c.type, rows, r, size_t(bc));
        break;
      }
      case From::kNull:
        rb.null(c.type);
        break;
      case From::kFileStart:
        rb.integer(c.type, int64_t(spool_.file_start()));
        break;
      case From::kVendor:
        rb.text(c.type, names.source->first);
        break;
      case From::kApi:
        rb.text(c.type, names.source->second);
        break;
      case From::kKind:
        rb.text(c.type, names.op->first);
        break;
      case From::kOp:
        rb.text(c.type, names.op->second);
        break;
      case From::kSessionStart: {
        auto it = sessions_.find(block_int(w_session_));
        rb.integer(c.type, it == sessions_.end() ? 0 : it->second);
        break;
      }
      case From::kNestedOp: {
        auto it = ops_.find({block_int(w_nested_source_), block_int(w_nested_op_)});
        rb.text(c.type, it == ops_.end() ? std::string_view() : it->second.second);
        break;
      }
    }
  }
}

ingero::Result<bool> BlockRows::next_batch(int64_t after, const BatchLimits& limits,
                                           RowBatch& out) {
  out.clear();
  // Names, host rows, the block list and each block, all as of one commit of the writer. Its
  // commits hold calls and host events whose ids interleave: host rows read before a commit and
  // calls read after it put the commit's calls in this batch without its host events, which
  // the next batch, reading past the last id sent, would never send. Declared first, so it
  // ends after the scan's statements.
  store::ReadSnapshot snapshot(spool_.db());
  if (auto s = load_names(); !s) return s.error();
  if (auto s = host_rows(after, limits.rows + 1); !s) return s.error();
  store::ArchiveScan scan(spool_.db().handle(), store::sql_calls_form(), spool_.path(), wanted_,
                          w_ts_, w_id_);
  store::ArchiveScan::Bounds bounds;
  bounds.lo_id = after < store::ArchiveScan::kMax ? after + 1 : after;
  auto failed = [&](int rc) {
    return ingero::make_error(rc == SQLITE_CORRUPT
                                  ? scan.error()
                                  : spool_.path() + ": reading call blocks: " + sqlite3_errstr(rc));
  };
  int rc = scan.start(bounds, false);
  if (rc != SQLITE_OK) return failed(rc);
  const bool timed = day_col_ >= 0;
  int64_t prev = after;
  RowBinary rb(out.body);
  NameCache names;
  size_t h = 0;
  while (true) {
    bool call = !scan.eof(), host = h < host_index_.size();
    if (!call && !host) break;
    if (host && (!call || host_index_[h].id < scan.id())) {
      const HostRow& hr = host_index_[h];
      if (!out.admit(limits, timed, hr.time)) break;
      out.body.append(host_, hr.begin, hr.end - hr.begin);
      out.added(hr.id, timed, hr.time);
      prev = hr.id;
      ++h;
      continue;
    }
    const int64_t id = scan.id(), ts = scan.ts();
    if (id <= prev) return false;
    if (!out.admit(limits, timed, ts)) break;
    put_call(scan, rb, names);
    out.added(id, timed, ts);
    prev = id;
    if (rc = scan.next(); rc != SQLITE_OK) return failed(rc);
  }
  return true;
}

}  // namespace ingero::fleet
