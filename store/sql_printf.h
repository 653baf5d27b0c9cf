// SQL printf() and format() on a connection that runs users' statements (store::confine): a
// width or precision past the connection's value length limit is an error. SQLite pads such a
// value inside one step of its virtual machine, where no progress handler runs: one
// printf('%.*c', 2147483647 - i, 'x') took 8-10 s of CPU per row, past `query --timeout`, MCP
// run_sql's limit and its cancellation (a statement of 300 such calls ran for tens of minutes).
// Within the limit, the value is SQLite's own printf's, computed on a private in-memory
// connection.
#pragma once

#include <sqlite3.h>

namespace ingero::store {

// Replaces printf() and format() on `db` for as long as it is open. SQLITE_OK, or SQLite's
// error code.
int guard_printf(sqlite3* db);

}  // namespace ingero::store
