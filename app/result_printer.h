// Printing query results as an aligned text table (JSON: store/query_json.h).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "store/trace_reader.h"

namespace ingero::app {

// The widest a value is shown in the table, in characters: longer ones are cut to
// kCellChars - 3 and "...", on a character's boundary.
inline constexpr size_t kCellChars = 80;

// Returns how many values were cut (the caller says so: --json gives them whole).
size_t print_table(std::ostream& out, const store::QueryResult& r);

}  // namespace ingero::app
