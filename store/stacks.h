// Call stacks stored with a trace, read through the `stacks` view (one row per frame,
// innermost first), which covers our stack_frames table and the original implementation's
// stack_traces alike. Events reference a stack by calls.stack_hash = stacks.stack_id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct StackFrame {
  bool python = false;
  std::string function;  // demangled native symbol (ours), "sym+0x1f" (legacy), or Python func
  std::string file;      // source file (DWARF or co_filename); "" when unknown
  int64_t line = 0;      // 0 when unknown
  std::string module;    // native: mapped file
  std::optional<int64_t> module_offset;
  std::string address;   // "libx.so+0x1a2b" (ours) or the raw "0x7f..." (legacy)
  std::string location;  // one line, as the view renders it
  std::string build_id;  // native: the mapped file's GNU build id (hex); "" when unknown
};

// Whether the trace holds any stack.
bool has_stacks(Db& db);
// The frames of one stack, innermost first; nullopt when the id is unknown.
ingero::Result<std::optional<std::vector<StackFrame>>> read_stack(Db& db, int64_t stack_id);

}  // namespace ingero::store
