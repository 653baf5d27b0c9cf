// Printing query results: an aligned text table, or a JSON array of row objects.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "store/trace_reader.h"

namespace ingero::app {

void print_table(std::ostream& out, const store::QueryResult& r);
nlohmann::json to_json(const store::QueryResult& r);
nlohmann::json to_json(const store::Value& v);
std::string to_text(const store::Value& v);

}  // namespace ingero::app
