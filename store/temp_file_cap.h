// A bound on the temporary files SQLite writes for a statement's sorts, GROUP BY, DISTINCT and
// temporary b-trees. `ingero query` spilled ~170 MB/s of them (5 GB in one 30 s statement),
// into the temporary folder, often on the disk the tracer writes its trace to.
//
// cap_temp_files() makes a shim over the default VFS the process's default: every connection
// opened after it counts the bytes its temporary files hold (their extents; a file's bytes
// are given back when it is truncated or closed). A write that would take the process's total
// past the cap fails with SQLITE_FULL (SQLite: "database or disk is full"), and
// temp_cap_hit() says that this was the cap, not the disk. Files other than temporary ones
// are the default VFS's own, untouched. For a one-shot process (`query`); once per process.
#pragma once

#include <cstdint>

#include "hal/result.h"

namespace ingero::store {

ingero::Status cap_temp_files(uint64_t max_bytes);
bool temp_cap_hit();
// The most the temporary files held at once, since cap_temp_files().
uint64_t temp_bytes_peak();
// The cap from now on: `max_bytes` beyond what the temporary files hold now. What opening the
// trace made (a legacy file's folded calls, store/legacy_views.h) is not the statement's.
void cap_temp_files_beyond_held(uint64_t max_bytes);

}  // namespace ingero::store
