#include "tests/fleet/fleet_support.h"

#include <gtest/gtest.h>

#include "store/trace_writer.h"
#include "tests/support/launch_trace.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

void write_session(const std::string& path, const std::string& node, int64_t start_wall_ns,
                   int events, int64_t step_ns) {
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = node;
  si.host = node;
  si.started_at_ns = start_wall_ns;
  si.mono_offset_ns = start_wall_ns - 1'000'000'000;  // mono 1 s = the first event
  ASSERT_TRUE((*w)->begin_session(si));
  ASSERT_TRUE((*w)->add_stack(77, {{false, "/opt/train", 0x1189, "b1d", "step('x'\t)", "t.c", 41},
                                   {true, "", std::nullopt, "", "main", "train.py", 9}}));
  for (uint32_t pid : {4001u, 4002u, 4003u})
    ASSERT_TRUE(
        (*w)->note_process(pid, "rank" + std::to_string(pid), "python train.py", start_wall_ns));
  for (int i = 0; i < events; ++i) {
    hal::Event e;
    e.ts_ns = uint64_t(1'000'000'000 + int64_t(i) * step_ns);
    e.dur_ns = 1000 + uint64_t(i);
    e.pid = 4001 + uint32_t(i % 3);
    e.tid = e.pid;
    e.set_comm("rank\t\"x\"");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = i % 2 ? "cudaLaunchKernel" : "cudaStreamSynchronize";
    e.kind = i % 2 ? hal::EventKind::kLaunch : hal::EventKind::kSync;
    e.has_ret = true;
    e.ret = i % 5 == 0 ? 35 : 0;
    if (i % 3 == 0) e.stack_id = 77;
    e.set(hal::Field::kStream, 0x5a);
    ASSERT_TRUE((*w)->add(e));
  }
  ASSERT_TRUE((*w)->add_snapshot({start_wall_ns, 12.5, 40, 0.5, 1000, 0, 1}));
  ASSERT_TRUE((*w)->add_snapshot({start_wall_ns + 1'000'000'000, 13.5, 41, 0.6, 990, 0, 2}));
  ASSERT_TRUE((*w)->add_cgroup_path(4242, "/system.slice/train.service"));
  store::ChainRow c;
  c.id = node + ":test:" + std::to_string(start_wall_ns);
  c.severity = "HIGH";
  c.summary = "a chain with a\nnewline";
  c.root_cause = c.explanation = "because";
  c.detected_at_ns = start_wall_ns;
  ASSERT_TRUE((*w)->replace_chains({c}));
  store::SessionEnd end;
  end.stopped_at_ns = start_wall_ns + int64_t(events) * step_ns + 2'000'000'000;
  end.exit_reason = "duration";
  ASSERT_TRUE((*w)->finish(end));
}

void write_launches(const std::string& path, int n,
                    const std::function<void(hal::Event&, int)>& shape) {
  write_launch_trace(path, n, "node-f", kBeforeMidnight - 3600 * 1'000'000'000LL, shape);
}

ingero::Status FlakyClient::insert(const std::string& table, const std::string& columns,
                                   std::string_view body, size_t rows, std::string_view format) {
  ++inserts;
  if (refuse.count(inserts)) {
    last_failure_ = fleet::Failure::kUnreachable;
    return ingero::make_error("injected: connection refused before insert " +
                              std::to_string(inserts));
  }
  if (drop.count(inserts)) return {};
  auto st = fleet::ClickHouseClient::insert(table, columns, body, rows, format);
  if (!st) return st;
  stored.push_back({table, rows});
  if (lose_answer.count(inserts)) {
    last_failure_ = fleet::Failure::kAmbiguous;
    return ingero::make_error("injected: the answer to insert " + std::to_string(inserts) +
                              " was lost after it was stored");
  }
  return st;
}

std::vector<std::pair<std::string, Counts>> compare_counts(const ClickHouseServers& ch, size_t i,
                                                           const std::string& db,
                                                           const std::string& file,
                                                           const std::string& node) {
  struct Q {
    const char* table;
    std::string key, version;  // distinct rows; distinct versions ("" = the key)
  };
  const std::vector<Q> qs = {
      {"events", "node, file_start, src_id", ""},
      {"sessions", "node, started_at", "node, started_at, stopped_at"},
      {"libraries", "node, file_start, src_id", ""},
      {"system_snapshots", "node, file_start, src_id", ""},
      {"process_stats", "node, file_start, src_id", ""},
      {"stack_frames", "node, stack_id, frame", ""},
      {"process_names", "node, pid", "node, pid, seen_at"},
      {"causal_chains", "node, session_start, id", ""},
      {"cgroup_metadata", "node, cgroup_id, cgroup_path", ""},
      // Every version of a stuck thread's row is shipped; the file keeps the latest.
      {"inflight", "node, session_start, tid, entered_at, what", "node, file_start, src_id"},
  };
  std::vector<std::pair<std::string, Counts>> out;
  const std::string where = node.empty() ? "" : " WHERE node = '" + node + "'";
  for (const Q& q : qs) {
    Counts c;
    c.file = query_int(file, std::string("SELECT count(*) FROM ") + q.table);
    const std::string t = " FROM " + db + "." + q.table + where;
    std::string version = q.version.empty() ? q.key : q.version;
    c.rows = ch.query_int(i, "SELECT uniqExact(" + q.key + ")" + t);
    c.duplicates = ch.query_int(i, "SELECT count() - uniqExact(" + version + ")" + t);
    out.push_back({q.table, c});
  }
  return out;
}

fleet::Endpoint endpoint(const ClickHouseServers& ch, size_t i, const std::string& db) {
  auto e = fleet::parse_endpoint(ch.url(i, db));
  EXPECT_TRUE(e);
  return *e;
}

void expect_exact(const ClickHouseServers& ch, size_t i, const std::string& db,
                  const std::string& file, const std::string& node) {
  long long total = 0;
  for (const auto& [table, c] : compare_counts(ch, i, db, file, node)) {
    EXPECT_EQ(c.rows, c.file) << table << ": rows in ClickHouse vs the file";
    EXPECT_EQ(c.duplicates, 0) << table;
    total += c.file;
  }
  EXPECT_GT(total, 0);
}

}  // namespace ingero::test
