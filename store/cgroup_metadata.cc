#include "store/cgroup_metadata.h"

#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status add_cgroup_name_columns(Db& db) {
  for (const char* c : kCgroupNameColumns)
    if (!db.column_exists("cgroup_metadata", c))
      if (auto st = db.exec(std::string("ALTER TABLE cgroup_metadata ADD COLUMN ") + c + " TEXT");
          !st)
        return st;
  return {};
}

ingero::Result<std::map<uint64_t, engine::CgroupInfo>> read_cgroups(Db& db) {
  std::map<uint64_t, engine::CgroupInfo> out;
  if (!db.table_exists("cgroup_metadata")) return out;
  // The original implementation's files, and ours from before the name columns, lack some.
  auto col = [&](const char* c) {
    return db.column_exists("cgroup_metadata", c) ? std::string("coalesce(") + c + ", '')"
                                                  : std::string("''");
  };
  auto st = db.prepare("SELECT cgroup_id, " + col("cgroup_path") + ", " + col("container_id") +
                       ", " + col("container_name") + ", " + col("pod_name") + ", " +
                       col("namespace") + ", " + col("pod_uid") + ", " + col("qos_class") + ", " +
                       col("runtime") + " FROM cgroup_metadata");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    engine::CgroupInfo& c = out[uint64_t(st->int64(0))];
    c.path = st->text(1);
    c.container_id = st->text(2);
    c.container = st->text(3);
    c.pod = st->text(4);
    c.pod_namespace = st->text(5);
    c.pod_uid = st->text(6);
    c.qos = st->text(7);
    c.runtime = st->text(8);
  }
  return out;
}

ingero::Status TraceWriter::add_cgroup(const CgroupRow& r) {
  if (auto st = begin_if_needed(); !st) return st;
  auto st = db_->prepare(
      "INSERT OR REPLACE INTO cgroup_metadata (cgroup_id, cgroup_path, container_id, pod_name, "
      "namespace, container_name, pod_uid, qos_class, runtime, names_from) VALUES (?, ?, ?, ?, ?, "
      "?, ?, ?, ?, ?)");
  if (!st) return st.error();
  auto opt = [&](int i, const std::optional<std::string>& v) {
    if (v)
      st->bind(i, std::string_view(*v));
    else
      st->bind_null(i);
  };
  st->bind(1, int64_t(r.cgroup_id))
      .bind(2, std::string_view(r.path))
      .bind(3, std::string_view(r.container_id))
      .bind(4, std::string_view(r.pod.value_or("")))
      .bind(5, std::string_view(r.pod_namespace.value_or("")));
  opt(6, r.container);
  opt(7, r.pod_uid);
  opt(8, r.qos);
  opt(9, r.runtime);
  opt(10, r.names_from);
  if (auto x = st->step(); !x) return x.error();
  return {};
}

}  // namespace ingero::store
