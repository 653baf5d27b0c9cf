#include "store/call_summaries.h"

#include <algorithm>
#include <vector>

namespace ingero::store {

namespace {
constexpr int64_t kSecond = 1000000000;
}  // namespace

size_t CallSummarizer::node_index(std::string_view node) {
  // One node per writer; merged files' backfill sees a few.
  for (size_t i = nodes_.size(); i-- > 0;)
    if (nodes_[i] == node) return i;
  nodes_.emplace_back(node);
  return nodes_.size() - 1;
}

CallSummarizer::Acc& CallSummarizer::find(const Key& k) {
  size_t h = size_t(k.second) * 0x9E3779B97F4A7C15ull ^ size_t(k.tid) * 0xC2B2AE3D27D4EB4Full ^
             size_t(k.op) * 31 ^ size_t(k.source) * 131 ^ size_t(k.pid) ^ k.node ^
             size_t(k.session_id) * 7;
  auto& slot = recent_[(h ^ (h >> 29)) % kRecent];
  if (slot.acc && slot.key == k) return *slot.acc;
  Acc& a = open_[k];
  slot = {k, &a};
  return a;
}

void CallSummarizer::add(std::string_view node, int64_t session_id, const SummarizedCall& c) {
  int64_t second = c.ts_ns >= 0 ? c.ts_ns / kSecond : (c.ts_ns - kSecond + 1) / kSecond;
  Acc& a = find(Key{second, node_index(node), session_id, c.pid, c.tid, c.source, c.op});
  ++a.calls;
  a.bytes += c.bytes;
  newest_ns_ = std::max(newest_ns_, c.ts_ns);
  if (!c.timed) return;  // counted; its duration and outcome are not known
  ++a.timed;
  if (c.unfinished)
    ++a.unfinished;
  else if (c.error)
    ++a.errors;
  a.sum_ns += c.dur_ns;
  a.min_ns = std::min(a.min_ns, c.dur_ns);
  a.max_ns = std::max(a.max_ns, c.dur_ns);
  a.off_cpu_ns += c.off_cpu_ns;
  a.preempts += c.preempts;
  a.sketch.add(c.dur_ns);
}

ingero::Status CallSummarizer::flush(Db& db, int64_t before_ns) {
  if (open_.empty()) return {};
  auto ins_cached = db.cached(
      "INSERT INTO call_seconds (node, session_id, timestamp, pid, tid, source, op, calls, "
      "errors, unfinished, sum_ns, min_ns, max_ns, off_cpu_ns, preempts, bytes, sketch, timed) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins_cached) return ins_cached.error();
  Stmt& ins = **ins_cached;
  auto it = open_.begin();
  for (; it != open_.end(); ++it) {
    const Key& k = it->first;
    if (before_ns != INT64_MAX && (k.second + 1) * kSecond > before_ns) break;
    const Acc& a = it->second;
    std::string blob = a.sketch.serialize();
    ins.reset();
    ins.bind(1, std::string_view(nodes_[k.node]))
        .bind(2, k.session_id)
        .bind(3, k.second * kSecond)
        .bind(4, int64_t(k.pid))
        .bind(5, int64_t(k.tid))
        .bind(6, int64_t(k.source))
        .bind(7, int64_t(k.op))
        .bind(8, int64_t(a.calls))
        .bind(9, int64_t(a.errors))
        .bind(10, int64_t(a.unfinished))
        .bind(11, int64_t(a.sum_ns))
        .bind(12, int64_t(a.timed ? a.min_ns : 0))
        .bind(13, int64_t(a.max_ns))
        .bind(14, int64_t(a.off_cpu_ns))
        .bind(15, int64_t(a.preempts))
        .bind(16, int64_t(a.bytes));
    sqlite3_bind_blob(ins.get(), 17, blob.data(), int(blob.size()), SQLITE_TRANSIENT);
    ins.bind(18, int64_t(a.timed));
    if (auto r = ins.step(); !r) return r.error();
  }
  if (it != open_.begin()) recent_.fill(Slot{});
  while (open_.begin() != it) {
    auto node = open_.extract(open_.begin());
    if (auto [pos, fresh, rest] = written_.insert(std::move(node)); !fresh)
      merge(pos->second, rest.mapped());  // a late call's second, flushed twice
  }
  return {};
}

void CallSummarizer::merge(Acc& into, const Acc& a) {
  into.calls += a.calls;
  into.timed += a.timed;
  into.errors += a.errors;
  into.unfinished += a.unfinished;
  into.sum_ns += a.sum_ns;
  into.min_ns = std::min(into.min_ns, a.min_ns);
  into.max_ns = std::max(into.max_ns, a.max_ns);
  into.off_cpu_ns += a.off_cpu_ns;
  into.preempts += a.preempts;
  into.bytes += a.bytes;
  into.sketch.merge(a.sketch);
}

void CallSummarizer::rolled_back() {
  for (auto& [k, a] : written_) merge(open_[k], a);
  written_.clear();
  recent_.fill(Slot{});
}

}  // namespace ingero::store
