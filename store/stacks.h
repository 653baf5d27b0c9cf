// Call stacks stored with a trace, keyed by the stack hash events carry (`stack_hash`).
// Reads the original implementation's `stack_traces` table (frames as JSON: native frames
// {i, s, f} and Python frames {pf, pfn, pl}) and, from schema v4, our `stacks` table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct StackFrame {
  uint64_t ip = 0;
  std::string symbol;  // "cudaLaunchKernel+0x2eb" ("" when unresolved)
  std::string file;    // the mapped file (basename or path)
  // Python frames (interpreter frames resolved to source): file, function, line.
  std::string py_file, py_func;
  uint32_t py_line = 0;
  bool is_python() const { return !py_file.empty() || !py_func.empty(); }
};

// Whether the trace has a table of stacks at all (a trace recorded without stacks has none,
// or an empty one).
bool has_stacks(Db& db);
// The frames of one stack, innermost first; nullopt when the hash is unknown.
ingero::Result<std::optional<std::vector<StackFrame>>> read_stack(Db& db, int64_t hash);
// Parses the original implementation's frames JSON. Malformed text is an error, not a crash.
ingero::Result<std::vector<StackFrame>> parse_legacy_frames(std::string_view json);

}  // namespace ingero::store
