#include "store/unsummarised_calls.h"

#include <algorithm>
#include <vector>

#include "hal/call_failure.h"
#include "store/call_block.h"
#include "store/call_store.h"

namespace ingero::store {
namespace {

constexpr int64_t kSecond = 1000000000;

ingero::Status each_of_session(Db& db, int64_t session, const UnsummarisedCall& f) {
  auto last = db.query_int("SELECT max(timestamp) FROM call_seconds WHERE session_id = " +
                           std::to_string(session));
  if (!last) return last.error();
  int64_t from = last->has_value() ? **last + kSecond : INT64_MIN;
  auto blocks = db.prepare(
      "SELECT id, node FROM call_store WHERE session_id = ? AND last_ts >= ? AND full IS NOT "
      "NULL ORDER BY id");
  if (!blocks) return blocks.error();
  blocks->bind(1, session).bind(2, from);
  while (true) {
    auto r = blocks->step();
    if (!r) return r.error();
    if (!*r) break;
    auto rows = decode_full(db, blocks->int64(0));
    if (!rows) return rows.error();
    CallBlock b;
    if (auto st = b.add_decoded(*rows, [](int, int) { return false; }); !st) return st;
    const ColumnBlock& c = b.columns();
    for (size_t i = 0; i < b.size(); ++i) {
      SummarizedCall s;
      s.ts_ns = c.int64(i, kCallTs);
      if (s.ts_ns < from) continue;
      s.timed = c.has(i, kCallDur) && c.int64(i, kCallStatus) != kStatusUntimed;
      s.dur_ns = uint64_t(std::max<int64_t>(0, c.int64(i, kCallDur)));
      s.pid = uint32_t(c.int64(i, kCallPid));
      s.tid = uint32_t(c.int64(i, kCallTid));
      s.source = int(c.int64(i, kCallSource));
      s.op = int(c.int64(i, kCallOp));
      s.unfinished = c.int64(i, kCallStatus) == kStatusUnfinished;
      size_t cls = kCallFirstField + size_t(hal::Field::kErrClass);
      s.error =
          c.has(i, kCallRet) &&
          hal::is_failure(c.int64(i, kCallRet), c.has(i, cls) ? uint64_t(c.int64(i, cls)) : 0);
      s.off_cpu_ns = uint64_t(c.int64(i, kCallOffCpu));
      s.preempts = uint64_t(c.int64(i, kCallPreempts));
      s.bytes = uint64_t(c.int64(i, kCallFirstField + size_t(hal::Field::kBytes)));
      f(c.text(i, kCallNode), session, s);
    }
  }
  return {};
}

}  // namespace

ingero::Result<RowBlock> decode_full(Db& db, int64_t block) {
  auto st = db.prepare("SELECT full FROM call_store WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, block);
  auto r = st->step();
  if (!r) return r.error();
  if (!*r || st->is_null(0))
    return ingero::make_error(db.path() + ": call block " + std::to_string(block) +
                              " has no calls to fold");
  std::string_view data(static_cast<const char*>(sqlite3_column_blob(st->get(), 0)),
                        size_t(sqlite3_column_bytes(st->get(), 0)));
  auto rows = RowBlock::decode(data);
  if (!rows)
    return ingero::make_error(db.path() + ": call block " + std::to_string(block) + ": " +
                              rows.error().message);
  return std::move(*rows);
}

ingero::Result<std::vector<int64_t>> unended_sessions(Db& db) {
  std::vector<int64_t> sessions;
  if (!db.column_exists("sessions", "stopped_at")) return sessions;
  auto st = db.prepare("SELECT id FROM sessions WHERE stopped_at = 0 ORDER BY id");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    sessions.push_back(st->int64(0));
  }
  return sessions;
}

ingero::Status for_each_unsummarised_call(Db& db, const UnsummarisedCall& f) {
  if (!has_call_store(db) || !db.table_exists("call_seconds")) return {};
  auto sessions = unended_sessions(db);
  if (!sessions) return sessions.error();
  for (int64_t s : *sessions)
    if (auto st = each_of_session(db, s, f); !st) return st;
  return {};
}

}  // namespace ingero::store
