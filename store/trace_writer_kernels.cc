// TraceWriter's kernel names (store/kernel_names.h): one row per (node, pid, func), and the
// session's naming counters.
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::add_kernel_name(const hal::KernelName& k) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st_cached = db_->cached(
      "INSERT OR IGNORE INTO kernel_names (node, pid, func, name, raw_name, source, session_id, "
      "seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!st_cached) return st_cached.error();
  Stmt& st = **st_cached;
  st.bind(1, node_)
      .bind(2, int64_t(k.pid))
      .bind(3, int64_t(k.func))
      .bind(4, k.name)
      .bind(5, k.raw)
      .bind(6, hal::kernel_name_source_name(k.source))
      .bind(7, session_id_)
      .bind(8, to_wall(k.ts_ns));
  if (auto r = st.step(); !r) return r.error();
  if (sqlite3_changes(db_->handle()) > 0) return {};
  // Named already: by this name again (a re-exec of the same program), or by another one (a
  // reused pid), which every launch of the key would then wear: the first name stays, counted.
  auto old_cached =
      db_->cached("SELECT name FROM kernel_names WHERE node = ? AND pid = ? AND func = ?");
  if (!old_cached) return old_cached.error();
  Stmt& old = **old_cached;
  old.bind(1, node_).bind(2, int64_t(k.pid)).bind(3, int64_t(k.func));
  auto r = old.step();
  if (!r) return r.error();
  if (*r && old.text_view(0) != k.name) ++kernel_name_conflicts_;
  old.reset();  // no statement of the writer's is left reading
  return {};
}

ingero::Status TraceWriter::update_kernel_naming(const engine::KernelNaming& n) {
  auto st = db_->prepare(
      "UPDATE sessions SET kernels_named = ?, unnamed_launches = ?, unnamed_functions = ?, "
      "unreadable_kernel_names = ?, kernel_name_conflicts = ? WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, int64_t(n.names))
      .bind(2, int64_t(n.unnamed_launches))
      .bind(3, int64_t(n.unnamed_functions))
      .bind(4, int64_t(n.unreadable))
      .bind(5, int64_t(n.conflicts + kernel_name_conflicts_))
      .bind(6, session_id_);
  if (auto r = st->step(); !r) return r.error();
  return {};
}

}  // namespace ingero::store
