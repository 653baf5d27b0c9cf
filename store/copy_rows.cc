#include "store/copy_rows.h"

#include <sqlite3.h>

#include <vector>

#include "store/trace_writer.h"

namespace ingero::store {
namespace {

bool readable(Db& db, const std::string& name) {
  auto st = db.prepare(
      "SELECT 1 FROM sqlite_master WHERE name = ?1 AND type IN ('table', 'view') UNION ALL "
      "SELECT 1 FROM sqlite_temp_master WHERE name = ?1 AND type IN ('table', 'view')");
  if (!st) return false;
  st->bind(1, std::string_view(name));
  auto r = st->step();
  return r && *r;
}

struct Column {
  std::string name;
  bool new_id = false;  // a surrogate `id INTEGER PRIMARY KEY`: given anew (a natural key, such
                        // as cgroup_metadata.cgroup_id, is copied)
};

// The destination's columns (main schema).
ingero::Result<std::vector<Column>> columns_of(Db& db, const std::string& table) {
  auto st = db.prepare("SELECT name, upper(type), pk FROM pragma_table_info(?)");
  if (!st) return st.error();
  st->bind(1, std::string_view(table));
  std::vector<Column> out;
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    out.push_back(
        {st->text(0), st->text(0) == "id" && st->text(1) == "INTEGER" && st->int64(2) == 1});
  }
  return out;
}

}  // namespace

ingero::Result<uint64_t> copy_rows(Db& from, Db& to, const std::string& table,
                                   const std::optional<std::string>& node,
                                   std::optional<int64_t> session, const std::string& as_node) {
  if (!readable(from, table) || !to.table_exists(table)) return uint64_t(0);
  auto dest = columns_of(to, table);
  if (!dest) return dest.error();
  auto probe = from.prepare("SELECT * FROM " + table + " LIMIT 0");
  if (!probe) return probe.error();
  std::vector<std::string> source;
  for (int i = 0; i < sqlite3_column_count(probe->get()); ++i)
    source.emplace_back(sqlite3_column_name(probe->get(), i));
  auto index_of = [&](const std::string& c) -> int {
    for (size_t i = 0; i < source.size(); ++i)
      if (source[i] == c) return int(i);
    return -1;
  };
  // The columns copied, in the destination's terms, and where each value comes from.
  std::string names, marks;
  constexpr int kSession = -1, kNode = -2, kChainId = -3;
  std::vector<int> from_col;
  for (const Column& c : *dest) {
    if (c.new_id) continue;
    int i = index_of(c.name);
    if (c.name == "session_id" && session && i >= 0)
      i = kSession;
    else if (c.name == "node" && !as_node.empty() && i >= 0)
      i = kNode;
    else if (c.name == "id" && table == "causal_chains" && session && i >= 0)
      i = kChainId;
    else if (i < 0)
      continue;
    names += (names.empty() ? "" : ", ") + c.name;
    marks += marks.empty() ? "?" : ", ?";
    from_col.push_back(i);
  }
  if (from_col.empty()) return uint64_t(0);
  std::string select = "SELECT * FROM " + table;
  bool by_node = node && index_of("node") >= 0;
  if (by_node) select += " WHERE node = ?";
  if (index_of("id") >= 0) select += " ORDER BY id";
  auto rows = from.prepare(select);
  if (!rows) return rows.error();
  if (by_node) rows->bind(1, std::string_view(*node));
  auto ins =
      to.prepare("INSERT OR IGNORE INTO " + table + " (" + names + ") VALUES (" + marks + ")");
  if (!ins) return ins.error();
  uint64_t copied = 0;
  while (true) {
    auto r = rows->step();
    if (!r) return r.error();
    if (!*r) break;
    ins->reset();
    for (size_t k = 0; k < from_col.size(); ++k) {
      int at = int(k) + 1;
      if (from_col[k] == kSession)
        sqlite3_bind_int64(ins->get(), at, *session);
      else if (from_col[k] == kNode)
        sqlite3_bind_text(ins->get(), at, as_node.data(), int(as_node.size()), SQLITE_STATIC);
      else if (from_col[k] == kChainId) {
        // Another session's chain (merged from another file of the node) may hold the id:
        // kept as ID@SESSION, as the writer keeps it, not dropped by the IGNORE.
        auto id = stored_chain_id(to, rows->text(index_of("id")), *session);
        if (!id) return ingero::make_error(table + ": " + id.error().message);
        sqlite3_bind_text(ins->get(), at, id->data(), int(id->size()), SQLITE_TRANSIENT);
      } else
        sqlite3_bind_value(ins->get(), at, sqlite3_column_value(rows->get(), from_col[k]));
    }
    auto done = ins->step();
    if (!done) return ingero::make_error(table + ": " + done.error().message);
    copied += uint64_t(sqlite3_changes(to.handle()));
  }
  return copied;
}

}  // namespace ingero::store
