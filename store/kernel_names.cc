#include "store/kernel_names.h"

namespace ingero::store {
namespace {

const char* kKernelNamesDdl = R"SQL(
CREATE TABLE IF NOT EXISTS kernel_names (
  node TEXT NOT NULL DEFAULT '',
  pid INTEGER NOT NULL,
  func INTEGER NOT NULL,            -- calls.func of the launches it names
  name TEXT NOT NULL,               -- demangled: void scale<float>(float*, float, int)
  raw_name TEXT NOT NULL,           -- as the binary spells it: _Z5scaleIfEvPT_S0_i
  source TEXT NOT NULL,             -- registration | driver_lookup | elf_symbol
  session_id INTEGER NOT NULL DEFAULT 0,
  seen_at INTEGER NOT NULL DEFAULT 0,  -- unix epoch ns: when it became known
  PRIMARY KEY (node, pid, func)
) WITHOUT ROWID;
)SQL";

// What each session could not name (store::KernelNaming).
const char* kNamingColumns[] = {"kernels_named", "unnamed_launches", "unnamed_functions",
                                "unreadable_kernel_names", "kernel_name_conflicts"};

}  // namespace

ingero::Status migrate_kernel_names(Db& db) {
  if (auto st = db.exec(kKernelNamesDdl); !st) return st;
  for (const char* c : kNamingColumns)
    if (!db.column_exists("sessions", c))
      if (auto st = db.exec(std::string("ALTER TABLE sessions ADD COLUMN ") + c +
                            " INTEGER NOT NULL DEFAULT 0");
          !st)
        return st;
  return {};
}

ingero::Result<std::vector<engine::KernelNameInfo>> read_kernel_names(
    Db& db, const std::optional<std::string>& node) {
  std::vector<engine::KernelNameInfo> out;
  if (!db.table_exists("kernel_names")) return out;
  auto st = db.prepare("SELECT node, pid, func, name, raw_name, source FROM kernel_names" +
                       std::string(node ? " WHERE node = ?" : "") + " ORDER BY node, pid, func");
  if (!st) return st.error();
  if (node) st->bind(1, *node);
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    engine::KernelNameInfo k;
    k.node = st->text(0);
    k.pid = uint32_t(st->int64(1));
    k.func = uint64_t(st->int64(2));
    k.name = st->text(3);
    k.raw_name = st->text(4);
    k.source = st->text(5);
    out.push_back(std::move(k));
  }
  return out;
}

ingero::Result<std::optional<engine::KernelNaming>> read_kernel_naming(
    Db& db, const std::optional<std::string>& node) {
  if (!db.column_exists("sessions", "unnamed_launches"))
    return std::optional<engine::KernelNaming>();
  auto st = db.prepare(
      "SELECT coalesce(sum(kernels_named), 0), coalesce(sum(unnamed_launches), 0), "
      "coalesce(sum(unnamed_functions), 0), coalesce(sum(unreadable_kernel_names), 0), "
      "coalesce(sum(kernel_name_conflicts), 0), "
      // Not a column: the tracer's session end writes it among its counters (json_valid: a
      // damaged or foreign value counts nothing).
      "coalesce(sum(CASE WHEN json_valid(bpf_stats) THEN "
      "json_extract(bpf_stats, '$.unnamed_functions_at_rest') END), 0) FROM sessions" +
      std::string(node ? " WHERE node = ?" : ""));
  if (!st) return st.error();
  if (node) st->bind(1, *node);
  auto r = st->step();
  if (!r) return r.error();
  engine::KernelNaming n;
  n.names = uint64_t(st->int64(0));
  n.unnamed_launches = uint64_t(st->int64(1));
  n.unnamed_functions = uint64_t(st->int64(2));
  n.unreadable = uint64_t(st->int64(3));
  n.conflicts = uint64_t(st->int64(4));
  n.at_rest = uint64_t(st->int64(5));
  return std::optional<engine::KernelNaming>(n);
}

}  // namespace ingero::store
