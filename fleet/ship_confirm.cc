#include "fleet/ship_confirm.h"

#include <cctype>
#include <stdexcept>

namespace ingero::fleet {

BatchKey rowid_batch_key(const std::string& nodes_sql, uint64_t file_start, int64_t first_id,
                         int64_t last_id, const std::string& time_column, int64_t min_time,
                         int64_t max_time, uint64_t rows) {
  BatchKey k;
  k.where = "node IN " + nodes_sql + " AND file_start = " + std::to_string(file_start) +
            " AND src_id BETWEEN " + std::to_string(first_id) + " AND " + std::to_string(last_id);
  // Times are UInt64 in ClickHouse: a negative one (a damaged clock) was stored as its bits.
  if (!time_column.empty() && min_time >= 0 && max_time >= min_time)
    k.where += " AND " + time_column + " BETWEEN " + std::to_string(min_time) + " AND " +
               std::to_string(max_time);
  k.key = "src_id";
  k.rows = rows;
  return k;
}

TupleKeys::TupleKeys(const TableSpec& t, const std::vector<std::string>& columns) {
  for (const auto& name : columns) {
    int i = t.column_index(name);
    if (i < 0) throw std::logic_error("TupleKeys: " + t.name + " has no column " + name);
    auto type = parse_ch_type(t.columns[size_t(i)].type);
    if (!type) throw std::logic_error("TupleKeys: " + type.error().message);
    cols_.push_back(i);
    types_.push_back(*type);
    names_ += (names_.empty() ? "" : ", ") + name;
  }
}

void TupleKeys::add(const SpoolRow& row) {
  std::string tuple = "(";
  for (size_t i = 0; i < cols_.size(); ++i) {
    if (i) tuple += ", ";
    int64_t v = row.int64(cols_[i]);
    switch (types_[i].base) {
      case ChBase::kString:
        tuple += sql_quote(row.text(cols_[i]));
        break;
      case ChBase::kUInt8:
        tuple += std::to_string(uint8_t(v));
        break;
      case ChBase::kUInt32:
        tuple += std::to_string(uint32_t(v));
        break;
      case ChBase::kUInt64:
        tuple += std::to_string(uint64_t(v));
        break;
      default:
        tuple += std::to_string(v);
    }
  }
  tuples_.insert(tuple + ")");
}

BatchKey TupleKeys::key() const {
  BatchKey k;
  k.key = "(" + names_ + ")";
  std::string list;
  for (const auto& t : tuples_) list += (list.empty() ? "" : ", ") + t;
  k.where = k.key + " IN (" + list + ")";
  k.rows = tuples_.size();
  return k;
}

ingero::Status confirm_batch(ClickHouseClient& client, const std::string& table,
                             const BatchKey& key) {
  const std::string what = "the INSERT of " + std::to_string(key.rows) + " rows into " + table;
  const std::string where = "ClickHouse at " + client.endpoint().display();
  auto body =
      client.execute("SELECT uniqExact(" + key.key + ") FROM " + client.endpoint().database + "." +
                         table + " WHERE " + key.where + " FORMAT TabSeparated",
                     {{"max_query_size", std::to_string(64u << 20)}});
  if (!body)
    return ingero::make_error(body.error().message + " (reading back " + what +
                              " to confirm it: not counted as shipped)");
  // One line: the count. Anything else is not ClickHouse's answer.
  const std::string& b = *body;
  bool number = b.size() >= 2 && b.back() == '\n';
  for (size_t i = 0; number && i + 1 < b.size(); ++i) number = std::isdigit((unsigned char)b[i]);
  if (!number) {
    std::string shown = b.empty() ? "an empty body" : "'" + b.substr(0, 80) + "'";
    return ingero::make_error(where + " answered " + what +
                              " with success, but its answer to the read-back that confirms it "
                              "was " +
                              shown +
                              ", not a count: not counted as shipped (is this a ClickHouse "
                              "server, or something in front of it that does not pass answers?)");
  }
  uint64_t found = std::stoull(b);
  if (found < key.rows)
    return ingero::make_error(where + " answered " + what + " with success, but holds " +
                              std::to_string(found) + " of them: not counted as shipped");
  return {};
}

}  // namespace ingero::fleet
