#include "store/stacks.h"

namespace ingero::store {

bool has_stacks(Db& db) {
  auto n = db.query_int("SELECT count(*) FROM (SELECT 1 FROM stacks LIMIT 1)");
  return n && *n && **n > 0;
}

ingero::Result<std::optional<std::vector<StackFrame>>> read_stack(Db& db, int64_t stack_id) {
  auto st = db.prepare(
      "SELECT kind, function, file, line, module, module_offset, address, location, build_id "
      "FROM stacks "
      "WHERE stack_id = ? ORDER BY frame");
  if (!st) return st.error();
  st->bind(1, stack_id);
  std::vector<StackFrame> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    StackFrame f;
    f.python = st->text(0) == "python";
    f.function = st->text(1);
    f.file = st->text(2);
    f.line = st->is_null(3) ? 0 : st->int64(3);
    f.module = st->text(4);
    if (!st->is_null(5)) f.module_offset = st->int64(5);
    f.address = st->text(6);
    f.location = st->text(7);
    f.build_id = st->text(8);
    out.push_back(std::move(f));
  }
  if (out.empty()) return std::optional<std::vector<StackFrame>>();
  return std::optional<std::vector<StackFrame>>(std::move(out));
}

}  // namespace ingero::store
