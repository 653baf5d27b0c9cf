// The tables the shipper ships by key rather than by file row id (fleet/shipper.h): sessions,
// stacks, process names, cgroups and causal chains. Each batch is read back like the others
// (ship_confirm.h) before ShipState records it.
#include <set>

#include "fleet/shipper.h"

namespace ingero::fleet {
namespace {

using Clock = std::chrono::steady_clock;

const TableSpec& spec(const char* name) { return *find_table(name); }

}  // namespace

ingero::Status Shipper::ship_sessions() {
  const TableSpec& t = spec("sessions");
  std::string body;
  TupleKeys keys(t, {"node", "started_at", "stopped_at"});
  std::vector<std::pair<std::pair<std::string, uint64_t>, uint64_t>> shipped;
  auto st = spool_->select(t, "ORDER BY s.id", {}, [&](const SpoolRow& r) {
    std::pair<std::string, uint64_t> key{r.text(0), uint64_t(r.int64(1))};
    uint64_t stopped = uint64_t(r.int64(2));
    auto it = state_.sessions.find(key);
    if (it != state_.sessions.end() && (stopped == 0 || it->second >= stopped)) return true;
    r.append_row_binary(body, types(t));
    keys.add(r);
    shipped.push_back({key, stopped});
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  if (auto s = insert(t, body, keys.key()); !s) return s;
  for (const auto& [k, v] : shipped) state_.sessions[k] = v;
  return {};
}

ingero::Status Shipper::ship_stacks(Deadline deadline, bool& done) {
  const TableSpec& t = spec("stack_frames");
  if (!spool_->has_table(t)) return {};
  auto frames = spool_->frame_count();
  if (!frames) return frames.error();
  if (*frames == stacks_seen_frames_) return {};
  auto ids = spool_->stack_ids();
  if (!ids) return ids.error();
  std::string body;
  size_t rows = 0;
  std::vector<int64_t> batch;
  auto flush = [&]() -> ingero::Status {
    if (batch.empty()) return {};
    // A stack's frames are numbered from 0 once each: (stack_id, frame) is distinct per row.
    BatchKey key;
    key.key = "(stack_id, frame)";
    key.where = "node = " + sql_quote(spool_->origin_node()) + " AND stack_id IN (";
    for (size_t i = 0; i < batch.size(); ++i)
      key.where += (i ? ", " : "") + std::to_string(batch[i]);
    key.where += ")";
    key.rows = rows;
    if (auto s = insert(t, body, key); !s) return s;
    state_.stacks.insert(batch.begin(), batch.end());
    body.clear();
    rows = 0;
    batch.clear();
    return {};
  };
  for (int64_t id : *ids) {
    if (state_.stacks.count(id)) continue;
    if (Clock::now() >= deadline) {
      done = false;
      return flush();
    }
    auto st = spool_->select(t, "WHERE f.stack_id = :sid ORDER BY f.frame", {{":sid", id}},
                             [&](const SpoolRow& r) {
                               r.append_row_binary(body, types(t));
                               ++rows;
                               return true;
                             });
    if (!st) return st;
    batch.push_back(id);  // a stack's frames always travel in one INSERT
    if (rows >= opts_.batch_rows)
      if (auto s = flush(); !s) return s;
  }
  if (auto s = flush(); !s) return s;
  stacks_seen_frames_ = *frames;
  return {};
}

ingero::Status Shipper::ship_processes() {
  const TableSpec& t = spec("process_names");
  std::string body;
  TupleKeys keys(t, {"node", "pid", "seen_at"});
  std::vector<std::pair<std::pair<std::string, uint32_t>, uint64_t>> shipped;
  auto st = spool_->select(t, "ORDER BY p.rowid", {}, [&](const SpoolRow& r) {
    std::pair<std::string, uint32_t> key{r.text(0), uint32_t(r.int64(1))};
    uint64_t seen = uint64_t(r.int64(4));
    auto it = state_.processes.find(key);
    if (it != state_.processes.end() && it->second >= seen) return true;
    r.append_row_binary(body, types(t));
    keys.add(r);
    shipped.push_back({key, seen});
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  if (auto s = insert(t, body, keys.key()); !s) return s;
  for (const auto& [k, v] : shipped) state_.processes[k] = v;
  return {};
}

ingero::Status Shipper::ship_cgroups() {
  const TableSpec& t = spec("cgroup_metadata");
  if (!spool_->has_table(t)) return {};
  std::string body;
  std::vector<std::tuple<std::string, int64_t, std::string>> shipped;
  auto st = spool_->select(t, "ORDER BY g.cgroup_id", {}, [&](const SpoolRow& r) {
    std::tuple<std::string, int64_t, std::string> key{r.text(0), r.int64(1), cgroup_content(r)};
    if (state_.cgroups.count(key)) return true;
    r.append_row_binary(body, types(t));
    shipped.push_back(key);
    return true;
  });
  if (!st) return st;
  if (shipped.empty()) return {};
  // A cgroup ships again when its path or a name changed: the read-back looks for this
  // version of each row (its content, as ShipState keeps it), not an older one.
  BatchKey key;
  key.key = "(node, cgroup_id, " + cgroup_content_sql() + ")";
  std::set<std::string> tuples;
  for (const auto& [node, id, content] : shipped)
    tuples.insert("(" + sql_quote(node) + ", " + std::to_string(id) + ", " + sql_quote(content) +
                  ")");
  std::string list;
  for (const auto& tu : tuples) list += (list.empty() ? "" : ", ") + tu;
  key.where = key.key + " IN (" + list + ")";
  key.rows = tuples.size();
  if (auto s = insert(t, body, key); !s) return s;
  state_.cgroups.insert(shipped.begin(), shipped.end());
  return {};
}

ingero::Status Shipper::ship_chains() {
  const TableSpec& t = spec("causal_chains");
  if (!spool_->has_table(t)) return {};
  // A session's chains are final once it has stopped (they are stored just before).
  for (const SpoolSession& s : spool_->sessions()) {
    std::pair<std::string, uint64_t> key{s.node, s.started_at};
    if (!s.stopped_at || state_.chains.count(key)) continue;
    std::string body;
    TupleKeys keys(t, {"node", "session_start", "id"});
    auto st = spool_->select(t, "WHERE c.session_id = :sid ORDER BY c.rowid", {{":sid", s.id}},
                             [&](const SpoolRow& r) {
                               r.append_row_binary(body, types(t));
                               keys.add(r);
                               return true;
                             });
    if (!st) return st;
    if (keys.size())
      if (auto x = insert(t, body, keys.key()); !x) return x;
    state_.chains.insert(key);
  }
  return {};
}

}  // namespace ingero::fleet
