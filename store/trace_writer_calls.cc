// TraceWriter's calls: into blocks of columns as they come, written once per commit
// (store/call_block.h, store/call_store.h), folded when full, and folded for good as they age.
#include "hal/call_failure.h"
#include "store/block_level.h"
#include "store/call_store.h"
#include "store/tiers.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::load_ids() {
  auto host = db_->query_int("SELECT max(last_id) FROM host_store");
  if (!host) return host.error();
  auto calls = db_->query_int("SELECT max(last_id) FROM call_store");
  if (!calls) return calls.error();
  auto blocks = db_->query_int("SELECT max(id) FROM call_store");
  if (!blocks) return blocks.error();
  auto host_blocks = db_->query_int("SELECT max(id) FROM host_store");
  if (!host_blocks) return host_blocks.error();
  next_id_ = std::max(host->value_or(0), calls->value_or(0)) + 1;
  // A session never writes into another's block: a block is of one session.
  calls_.start_at(blocks->value_or(0) + 1);
  hosts_.start_at(host_blocks->value_or(0) + 1);
  return {};
}

ingero::Status TraceWriter::add_call(const hal::Event& ev, const OpIds& ids) {
  CallIds c;
  c.source = ids.source;
  c.op = ids.op;
  c.launch = ids.launch;
  if (ev.nested && !ev.nested_op.empty()) {
    auto nid = op_ids(ev.vendor, ev.nested_api, ev.nested_op, ev.nested_kind);
    if (!nid) return fail_batch(nid.error());
    c.nested_source = nid->source;
    c.nested_op = nid->op;
  }
  if (!ev.library.empty()) c.library = library_id(ev.library);
  int64_t ts = int64_t(ev.ts_ns) + mono_offset_ns_;
  if (block_span_ns_ > 0 && !calls_.filling().empty() &&
      ts - calls_.filling().first_ts() >= block_span_ns_)
    calls_.close();
  calls_.filling().add(next_id_++, ts, ev, c, node_, session_id_);
  if (ids.launch && ev.timed)
    launch_latency_[{session_id_, ev.pid, ids.source, ids.op}].add(ev.dur_ns);
  SummarizedCall s;
  s.ts_ns = ts;
  s.dur_ns = ev.dur_ns;
  s.pid = ev.pid;
  s.tid = ev.tid;
  s.source = ids.source;
  s.op = ids.op;
  s.timed = ev.timed;
  s.unfinished = ev.unfinished;
  // A call still in progress (err_class "not ready") is an answer, as in explain's errors.
  s.error = hal::is_failure(ev);
  s.off_cpu_ns = ev.off_cpu_ns;
  s.preempts = ev.preempts;
  s.bytes = ev.get_or(hal::Field::kBytes, 0);
  summaries_.add(node_, session_id_, s);
  if (calls_.filling().size() >= block_rows_) {
    calls_.close();  // written (and folded) by the commit
    if (calls_.full_rows() >= kMaxWaitingRows) return commit_batch(false, INT64_MIN, true);
  }
  return {};
}

std::optional<int64_t> TraceWriter::fold_limit(uint32_t pid, int source, int op) const {
  auto it = launch_latency_.find({session_id_, pid, source, op});
  if (it == launch_latency_.end() || it->second.empty()) return std::nullopt;
  return int64_t(double(it->second.quantile(0.95)) * kKeepAboveP95Share);
}

ingero::Status TraceWriter::write_block(const CallBlock& b, int64_t block_id, bool fold) {
  std::string& full = encoded_[0];
  if (!b.columns().encode_into(full, kLiveBlockLevel))
    return ingero::make_error("compressing a block failed");
  Stmt& ins = insert_block_;
  ins.reset();
  sqlite3_clear_bindings(ins.get());
  ins.bind(1, block_id)
      .bind(2, std::string_view(node_))
      .bind(3, session_id_)
      .bind(4, b.first_id())
      .bind(5, b.last_id())
      .bind(6, b.first_ts())
      .bind(7, b.last_ts())
      .bind(8, b.end_ts())
      .bind(9, int64_t(b.size()))
      .bind(10, int64_t(b.untimed()));
  sqlite3_bind_blob(ins.get(), 14, full.data(), int(full.size()), SQLITE_STATIC);
  std::string &kept = encoded_[1], &runs = encoded_[2];
  if (fold) {
    auto limit = [this](uint32_t pid, int source, int op) -> std::optional<int64_t> {
      if (!folding_) return std::nullopt;
      return fold_limit(pid, source, op);
    };
    b.fold(limit, folded_, folding_);
    ins.bind(11, int64_t(folded_.kept_rows))
        .bind(12, int64_t(folded_.runs.rows()))
        .bind(13, int64_t(folded_.folded));
    // A block folding left whole is its own folded form: `full` alone, kept for good.
    if (folded_.folded) {
      if (!folded_.kept.encode_into(kept, kLiveBlockLevel) ||
          !folded_.runs.encode_into(runs, kLiveBlockLevel))
        return ingero::make_error("compressing a block failed");
      sqlite3_bind_blob(ins.get(), 15, kept.data(), int(kept.size()), SQLITE_STATIC);
      sqlite3_bind_blob(ins.get(), 16, runs.data(), int(runs.size()), SQLITE_STATIC);
    }
  }
  if (auto r = ins.step(); !r) return r.error();
  return {};
}

ingero::Status TraceWriter::write_blocks(bool final) {
  return calls_.write(final, [this](const CallBlock& b, int64_t id, bool fold) {
    return write_block(b, id, fold);
  });
}

ingero::Result<uint64_t> TraceWriter::fold_blocks(int64_t before_ns, int64_t through_id) {
  if (auto st = commit(); !st) return st.error();
  // Every half second while tracing: prepared once (their parse was 6% of the tracer's CPU at a
  // few thousand calls a second), their bounds bound.
  constexpr const char* kWhere =
      " WHERE full IS NOT NULL AND kept_data IS NOT NULL AND end_ts < ?1 AND last_id <= ?2";
  auto count = db_->cached(std::string("SELECT coalesce(sum(calls), 0) FROM call_store") + kWhere);
  if (!count) return count.error();
  Stmt& c = **count;
  c.reset();
  c.bind(1, before_ns).bind(2, through_id);
  auto row = c.step();
  if (!row) return row.error();
  int64_t n = *row ? c.int64(0) : 0;
  c.reset();
  if (n == 0) return uint64_t(0);
  auto drop = db_->cached(std::string("UPDATE call_store SET full = NULL") + kWhere);
  if (!drop) return drop.error();
  Stmt& d = **drop;
  d.reset();
  d.bind(1, before_ns).bind(2, through_id);
  if (auto r = d.step(); !r) return r.error();
  d.reset();
  return uint64_t(n);
}

}  // namespace ingero::store
