// Query results (store::run_query) as text cells and JSON: one rendering for `query`, the MCP
// run_sql tool and the report.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "store/trace_reader.h"

namespace ingero::store {

std::string to_text(const Value& v);  // NULL, integers, doubles without trailing zeros, text
nlohmann::json to_json(const Value& v);
nlohmann::json to_json(const QueryResult& r);                  // an array of row objects
nlohmann::json row_to_json(const QueryResult& r, size_t row);  // one of them

}  // namespace ingero::store
