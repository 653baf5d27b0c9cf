// TraceWriter's calls: into blocks of columns as they come, written once per commit
// (store/call_block.h, store/call_store.h), folded when full, and folded for good as they age.
#include "store/call_store.h"
#include "store/tiers.h"
#include "store/trace_writer.h"

namespace ingero::store {

ingero::Status TraceWriter::load_ids() {
  auto host = db_->query_int("SELECT max(id) FROM host_rows");
  if (!host) return host.error();
  auto calls = db_->query_int("SELECT max(last_id) FROM call_store");
  if (!calls) return calls.error();
  auto blocks = db_->query_int("SELECT max(id) FROM call_store");
  if (!blocks) return blocks.error();
  next_id_ = std::max(host->value_or(0), calls->value_or(0)) + 1;
  // A session never writes into another's block: a block is of one session.
  if (block_->empty() && full_.empty()) block_id_ = blocks->value_or(0) + 1;
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
  if (block_span_ns_ > 0 && !block_->empty() && ts - block_->first_ts() >= block_span_ns_)
    close_block();
  block_->add(next_id_++, ts, ev, c, node_, session_id_);
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
  s.error = ev.has_ret && ev.ret != 0;
  s.off_cpu_ns = ev.off_cpu_ns;
  s.preempts = ev.preempts;
  s.bytes = ev.get_or(hal::Field::kBytes, 0);
  summaries_.add(node_, session_id_, s);
  if (block_->size() >= block_rows_) close_block();
  return {};
}

void TraceWriter::close_block() {
  // Written (and folded) by the commit; the next calls go into a new block.
  full_.push_back({block_id_++, std::move(block_), committed_rows_});
  if (spare_.empty()) {
    block_ = std::make_unique<CallBlock>();
  } else {
    block_ = std::move(spare_.back());
    spare_.pop_back();
  }
  committed_rows_ = 0;
}

std::optional<int64_t> TraceWriter::fold_limit(uint32_t pid, int source, int op) const {
  auto it = launch_latency_.find({session_id_, pid, source, op});
  if (it == launch_latency_.end() || it->second.empty()) return std::nullopt;
  return int64_t(double(it->second.quantile(0.95)) * kKeepAboveP95Share);
}

ingero::Status TraceWriter::write_block(const CallBlock& b, int64_t block_id, bool fold) {
  std::string& full = encoded_[0];
  if (!b.columns().encode_into(full)) return ingero::make_error("compressing a block failed");
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
    ins.bind(11, int64_t(folded_.kept.rows()))
        .bind(12, int64_t(folded_.runs.rows()))
        .bind(13, int64_t(folded_.folded));
    // A block folding left whole is its own folded form: `full` alone, kept for good.
    if (folded_.folded) {
      if (!folded_.kept.encode_into(kept) || !folded_.runs.encode_into(runs))
        return ingero::make_error("compressing a block failed");
      sqlite3_bind_blob(ins.get(), 15, kept.data(), int(kept.size()), SQLITE_STATIC);
      sqlite3_bind_blob(ins.get(), 16, runs.data(), int(runs.size()), SQLITE_STATIC);
    }
  }
  if (auto r = ins.step(); !r) return r.error();
  return {};
}

ingero::Status TraceWriter::write_blocks(bool final) {
  for (const auto& f : full_)
    if (auto st = write_block(*f.block, f.id, true); !st) return st;
  if (block_->empty() || (block_->size() == committed_rows_ && !final)) return {};
  return write_block(*block_, block_id_, final);
}

void TraceWriter::restore_blocks() {
  // The file holds what the last commit wrote: the block then filling, with committed_rows of
  // its calls (the first block that filled since, or the one filling now).
  if (!full_.empty()) {
    for (size_t i = 1; i < full_.size(); ++i) {
      full_[i].block->clear();
      spare_.push_back(std::move(full_[i].block));
    }
    block_->clear();
    spare_.push_back(std::move(block_));
    block_ = std::move(full_.front().block);
    block_id_ = full_.front().id;
    committed_rows_ = full_.front().committed;
    full_.clear();
  }
  block_->truncate(committed_rows_);
}

ingero::Result<uint64_t> TraceWriter::fold_blocks(int64_t before_ns, int64_t through_id) {
  if (auto st = commit(); !st) return st.error();
  auto n = db_->query_int(
      "SELECT coalesce(sum(calls), 0) FROM call_store WHERE full IS NOT NULL AND kept_data IS NOT "
      "NULL AND end_ts < " +
      std::to_string(before_ns) + " AND last_id <= " + std::to_string(through_id));
  if (!n) return n.error();
  if (n->value_or(0) == 0) return uint64_t(0);
  if (auto st = db_->exec(
          "UPDATE call_store SET full = NULL WHERE full IS NOT NULL AND kept_data IS NOT NULL AND "
          "end_ts < " +
          std::to_string(before_ns) + " AND last_id <= " + std::to_string(through_id));
      !st)
    return st.error();
  return uint64_t(n->value_or(0));
}

}  // namespace ingero::store
