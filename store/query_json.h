// Query results (store::run_query) as text cells and JSON: one rendering for `query`, the MCP
// run_sql tool and the report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/trace_reader.h"

namespace ingero::store {

std::string to_text(const Value& v);  // NULL, integers, doubles without trailing zeros, text
nlohmann::json to_json(const Value& v);
// An array of row objects, each with its columns in the statement's order. JSON keys are
// unique: a column named as one before it is keyed NAME_2 (NAME_3, ...; a name taken already is
// passed over), where an object keyed by name kept only the last of them.
nlohmann::ordered_json to_json(const QueryResult& r);
nlohmann::ordered_json row_to_json(const QueryResult& r, size_t row);  // one of them
// The same with json_keys(r) given, for a caller that writes the rows one by one.
nlohmann::ordered_json row_to_json(const QueryResult& r, size_t row,
                                   const std::vector<std::string>& keys);
// The keys of every row object, in order (the columns, renamed as above).
std::vector<std::string> json_keys(const QueryResult& r);

}  // namespace ingero::store
