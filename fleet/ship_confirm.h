// A batch counts as shipped only once ClickHouse confirms it holds the batch's rows.
//
// An HTTP 200 to an INSERT is not enough: an endpoint that answers 200 with an empty body (a
// proxy, a load balancer's health page, a server that drops what it is sent) made the tracer
// fold 301,159 launches that existed nowhere as rows (issue 37, item 6), since folding waits
// for the shipper's shipped-through id. ClickHouse 18.16 sends nothing with an INSERT's answer
// that says what it stored (no X-ClickHouse-Summary, no progress header: both came in later
// versions), so the shipper reads each batch back: one SELECT of uniqExact(key) over exactly
// the batch's rows, narrowed by the table's sorting key and partition (node, the batch's time
// range), so it reads the batch's granules, not the table. A server that does answer an
// INSERT with X-ClickHouse-Summary whose written_rows covers the batch is taken at its word
// (ClickHouseClient::written_rows); any other answer, fewer rows included, is read back.
//
// Reading back is also how the resume point is read (ship_state.h): an answer that is not one
// row of numbers (an empty body) is an error there too, never "nothing stored yet".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "fleet/ch_schema.h"
#include "fleet/clickhouse_client.h"
#include "fleet/spool.h"
#include "hal/result.h"

namespace ingero::fleet {

// Where a batch's rows are, as ClickHouse can count them.
struct BatchKey {
  std::string where;  // an SQL condition true of the batch's rows (and of no other rows)
  std::string key;    // an expression distinct per row of the batch: "src_id"
  uint64_t rows = 0;  // the distinct keys the batch holds
};

// The key of a batch of a table shipped by file row id: ids first..last of the file
// (node IN nodes, file_start), and where `time_column` is given, its values' range (the
// partition and the sorting key's time: the read-back skips the other parts and granules).
BatchKey rowid_batch_key(const std::string& nodes_sql, uint64_t file_start, int64_t first_id,
                         int64_t last_id, const std::string& time_column, int64_t min_time,
                         int64_t max_time, uint64_t rows);

// The key of a batch of rows named by some of their columns' values (sessions, process
// names, cgroups, chains): "(node, pid, seen_at) IN (('n', 4001, 17), ...)".
class TupleKeys {
 public:
  // `columns`: names of `t`'s columns (an unknown name is a programming error: it throws).
  TupleKeys(const TableSpec& t, const std::vector<std::string>& columns);
  void add(const SpoolRow& row);  // a row of `t` as Spool::select gives it
  size_t size() const { return tuples_.size(); }
  BatchKey key() const;

 private:
  std::vector<int> cols_;
  std::vector<ChType> types_;
  std::string names_;
  std::set<std::string> tuples_;
};

// Reads the batch back from `db`.`table`. OK when ClickHouse holds every row of it; an Error
// (naming the URL, the table and the counts) when it holds fewer, or when its answer to the
// read-back is not a count.
ingero::Status confirm_batch(ClickHouseClient& client, const std::string& table,
                             const BatchKey& key);

}  // namespace ingero::fleet
