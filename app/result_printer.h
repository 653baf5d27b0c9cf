// Printing query results as an aligned text table (JSON: store/query_json.h).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "store/trace_reader.h"

namespace ingero::app {

void print_table(std::ostream& out, const store::QueryResult& r);

}  // namespace ingero::app
