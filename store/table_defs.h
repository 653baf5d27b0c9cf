// The store's own description of the tables whose rows leave the trace file: each column once,
// with its SQLite declaration and its ClickHouse type. The SQLite DDL of these tables
// (store/schema.cc) and the ClickHouse tables the shipper fills (fleet/ch_schema.cc) are both
// generated from it, so a new column is added here and nowhere else.
//
// The description is of this build's schema (10). Files written by older builds lack some
// columns; readers check columns by name, and the shipper reads a missing column as NULL.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ingero::store {

struct ColumnDef {
  std::string name;
  std::string decl;     // SQLite: "INTEGER NOT NULL DEFAULT 0"
  std::string ch_type;  // ClickHouse: "UInt64"; "" when the column is not shipped
  std::string comment;  // kept in the DDL ("" = none)
  std::string ch_name;  // the ClickHouse column when it is named otherwise ("" = name)
  const std::string& fleet_name() const { return ch_name.empty() ? name : ch_name; }
  bool shipped() const { return !ch_type.empty(); }
};

struct TableDef {
  std::string name;
  std::vector<ColumnDef> columns;
  std::string constraints;  // table constraints after the columns: "PRIMARY KEY (node, pid)"
  std::string options;      // after the closing parenthesis: "WITHOUT ROWID"
  std::vector<std::string> indexes;  // CREATE INDEX statements that go with it
  const ColumnDef* column(std::string_view name) const;
};

// Every described table. The one named `name` (it must exist: a typo is a build's bug).
const std::vector<TableDef>& table_defs();
const TableDef& table_def(std::string_view name);
// CREATE TABLE IF NOT EXISTS (and its indexes), under `as` ("" = its own name).
std::string create_table_sql(const TableDef& t, const std::string& as = "");

// The events table (schema <= 9 kept calls and host events in it; schema 10 keeps host events
// in host_rows, of the same columns): its fixed columns, then one per decoded field.
const TableDef& events_def();

}  // namespace ingero::store
