// SQL functions that name a call's return code by the backends' tables (hal/error_codes.h),
// on the connections of readers given them (TraceReader::open): `ingero query`, MCP's query,
// every command that analyses a file.
//   error_name(api, ret)   TEXT  the vendor's name ("cudaErrorIllegalAddress"); NULL where ret
//                                is NULL, 0 or not an integer, or no backend knows the code
//   error_class(api, ret)  TEXT  its class: "no_device", "device_fault", "invalid",
//                                "not_ready", "out_of_memory", "other"; NULL where ret is NULL,
//                                0 or not an integer, "other" for a code no backend knows
#pragma once

#include <sqlite3.h>

#include "hal/error_codes.h"

namespace ingero::store {

// `codes` must outlive the connection.
void register_error_functions(sqlite3* db, const hal::ErrorCodeFn* codes);

}  // namespace ingero::store
