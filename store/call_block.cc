#include "store/call_block.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <unordered_map>

#include "store/tiers.h"

namespace ingero::store {

const std::vector<std::string>& call_column_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {
        "id",         "node",          "session_id",   "timestamp",     "duration",  "pid",
        "tid",        "source",        "op",           "ret_code",      "status",    "cgroup_id",
        "comm",       "off_cpu_ns",    "preempts",     "switches",      "peer_comm", "stack_hash",
        "library_id", "stack_of_site", "nested_calls", "nested_source", "nested_op"};
    for (size_t i = 0; i < hal::kFieldCount; ++i)
      v.emplace_back(hal::field_name(static_cast<hal::Field>(i)));
    return v;
  }();
  return names;
}

namespace {
enum RunColumn : size_t {
  kRunId,
  kRunNode,
  kRunSession,
  kRunTs,
  kRunSpan,
  kRunPid,
  kRunTid,
  kRunComm,
  kRunCgroup,
  kRunSource,
  kRunOp,
  kRunLibrary,
  kRunStream,
  kRunDevice,
  kRunCalls,
  kRunSum,
  kRunMin,
  kRunMax,
  kRunNested,
  kRunStack,
  kRunFirstCall,
  kRunTimed,
  kRunFunc,
  kRunFuncs,
};
// The most kernels a run of several keeps counts of; a run of more keeps none.
constexpr size_t kMaxRunKernels = 256;
constexpr size_t kStreamCol = kCallFirstField + size_t(hal::Field::kStream);
constexpr size_t kDeviceCol = kCallFirstField + size_t(hal::Field::kDevice);
constexpr size_t kFuncCol = kCallFirstField + size_t(hal::Field::kFunc);
}  // namespace

const std::vector<std::string>& run_column_names() {
  static const std::vector<std::string> names = {
      "id",           "node",       "session_id",    "timestamp",   "span_ns", "pid",
      "tid",          "comm",       "cgroup_id",     "source",      "op",      "library_id",
      "stream",       "device",     "calls",         "sum_ns",      "min_ns",  "max_ns",
      "nested_calls", "stack_hash", "first_call_id", "timed_calls", "func",    "funcs"};
  return names;
}

void CallBlock::add(int64_t id, int64_t ts_ns, const hal::Event& ev, const CallIds& ids,
                    std::string_view node, int64_t session) {
  ColumnBlock& c = cols_;
  c.set_int(kCallId, id);
  c.set_text(kCallNode, node);
  c.set_int(kCallSession, session);
  c.set_int(kCallTs, ts_ns);
  if (ev.timed) c.set_int(kCallDur, int64_t(ev.dur_ns));
  c.set_int(kCallPid, ev.pid);
  c.set_int(kCallTid, ev.tid);
  c.set_int(kCallSource, ids.source);
  c.set_int(kCallOp, ids.op);
  if (ev.has_ret) c.set_int(kCallRet, ev.ret);
  c.set_int(kCallStatus, ev.unfinished ? kStatusUnfinished
                         : ev.timed    ? kStatusComplete
                                       : kStatusUntimed);
  c.set_int(kCallCgroup, int64_t(ev.cgroup_id));
  auto comm = ev.comm_view();
  c.set_text(kCallComm, comm);
  if (ev.timed) {
    c.set_int(kCallOffCpu, int64_t(ev.off_cpu_ns));
    c.set_int(kCallPreempts, ev.preempts);
    c.set_int(kCallSwitches, ev.switches);
  }
  if (ev.peer_comm[0]) c.set_text(kCallPeerComm, ev.peer_comm_view());
  c.set_int(kCallStack, int64_t(ev.stack_id));
  if (ids.library) c.set_int(kCallLibrary, ids.library);
  if (ev.stack_of_site) c.set_int(kCallStackOfSite, 1);
  if (ev.nested) {
    c.set_int(kCallNested, ev.nested);
    if (ids.nested_source) {
      c.set_int(kCallNestedSource, ids.nested_source);
      c.set_int(kCallNestedOp, ids.nested_op);
    }
  }
  for (uint64_t m = ev.present; m; m &= m - 1) {
    int f = __builtin_ctzll(m);
    c.set_int(kCallFirstField + size_t(f), int64_t(ev.fields[size_t(f)]));
  }
  c.end_row();

  Meta m;
  m.id = id;
  m.ts = ts_ns;
  m.dur = ev.timed ? int64_t(ev.dur_ns) : 0;
  m.pid = ev.pid;
  m.tid = ev.tid;
  m.source = ids.source;
  m.op = ids.op;
  m.launch = ids.launch;
  m.timed = ev.timed;
  m.ok = ev.timed && !ev.unfinished && ev.has_ret && ev.ret == 0;
  m.on_cpu = ev.off_cpu_ns == 0 && ev.preempts == 0;
  if (ev.has(hal::Field::kStream)) m.stream = int64_t(ev.fields[size_t(hal::Field::kStream)]);
  if (ev.has(hal::Field::kDevice)) m.device = int64_t(ev.fields[size_t(hal::Field::kDevice)]);
  if (ev.has(hal::Field::kFunc)) m.func = int64_t(ev.fields[size_t(hal::Field::kFunc)]);
  if (ids.library) m.library = ids.library;
  m.cgroup = int64_t(ev.cgroup_id);
  auto known = std::find(comms_.rbegin(), comms_.rend(), comm);
  if (known == comms_.rend()) {
    m.comm = uint32_t(comms_.size());
    comms_.emplace_back(comm);
  } else {
    m.comm = uint32_t(comms_.rend() - known - 1);
  }
  m.nested = ev.nested;
  note(m);
}

ingero::Status CallBlock::add_decoded(const RowBlock& rows,
                                      const std::function<bool(int source, int op)>& launch) {
  const auto& mine = call_column_names();
  std::vector<int> from(mine.size(), -1);  // my column -> the block's
  for (size_t c = 0; c < rows.columns().size(); ++c) {
    auto it = std::find(mine.begin(), mine.end(), rows.columns()[c]);
    if (it != mine.end()) from[size_t(it - mine.begin())] = int(c);
  }
  for (size_t need :
       {size_t(kCallId), size_t(kCallTs), size_t(kCallPid), size_t(kCallSource), size_t(kCallOp)})
    if (from[need] < 0)
      return ingero::make_error("a block of calls without its " + mine[need] + " column");
  auto has = [&](size_t r, size_t col) {
    return from[col] >= 0 && rows.type(r, size_t(from[col])) != SQLITE_NULL;
  };
  auto num = [&](size_t r, size_t col) {
    return from[col] >= 0 ? rows.int64(r, size_t(from[col])) : int64_t(0);
  };
  for (size_t r = 0; r < rows.rows(); ++r) {
    for (size_t col = 0; col < mine.size(); ++col) {
      if (!has(r, col)) continue;
      int type = rows.type(r, size_t(from[col]));
      if (type == SQLITE_TEXT || type == SQLITE_BLOB)
        cols_.set_text(col, rows.bytes(r, size_t(from[col])));
      else
        cols_.set_int(col, num(r, col));
    }
    cols_.end_row();
    Meta m;
    m.id = num(r, kCallId);
    m.ts = num(r, kCallTs);
    m.timed = has(r, kCallDur) && num(r, kCallStatus) != kStatusUntimed;
    m.dur = m.timed ? num(r, kCallDur) : 0;
    m.pid = uint32_t(num(r, kCallPid));
    m.tid = uint32_t(num(r, kCallTid));
    m.source = int(num(r, kCallSource));
    m.op = int(num(r, kCallOp));
    m.launch = launch(m.source, m.op);
    m.ok = m.timed && num(r, kCallStatus) == kStatusComplete && has(r, kCallRet) &&
           num(r, kCallRet) == 0;
    m.on_cpu = num(r, kCallOffCpu) == 0 && num(r, kCallPreempts) == 0;
    if (has(r, kStreamCol)) m.stream = num(r, kStreamCol);
    if (has(r, kDeviceCol)) m.device = num(r, kDeviceCol);
    if (has(r, kFuncCol)) m.func = num(r, kFuncCol);
    if (has(r, kCallLibrary)) m.library = num(r, kCallLibrary);
    m.cgroup = num(r, kCallCgroup);
    std::string_view comm = from[kCallComm] >= 0 ? rows.bytes(r, size_t(from[kCallComm])) : "";
    auto known = std::find(comms_.begin(), comms_.end(), comm);
    m.comm = uint32_t(known - comms_.begin());
    if (known == comms_.end()) comms_.emplace_back(comm);
    m.nested = uint32_t(num(r, kCallNested));
    note(m);
  }
  return {};
}

void CallBlock::note(const Meta& m) {
  if (meta_.empty()) {
    first_id_ = m.id;
    first_ts_ = last_ts_ = m.ts;
    end_ts_ = m.ts + m.dur;
  }
  last_id_ = m.id;
  first_ts_ = std::min(first_ts_, m.ts);
  last_ts_ = std::max(last_ts_, m.ts);
  end_ts_ = std::max(end_ts_, m.ts + m.dur);
  if (!m.timed) ++untimed_;
  meta_.push_back(m);
}

void CallBlock::truncate(size_t rows) {
  if (rows >= meta_.size()) return;
  if (rows == 0) return clear();
  cols_.truncate(rows);
  std::vector<Meta> keep(meta_.begin(), meta_.begin() + long(rows));
  meta_.clear();
  untimed_ = 0;
  for (const Meta& m : keep) note(m);
}

void CallBlock::clear() {
  cols_.clear();
  meta_.clear();
  comms_.clear();
  untimed_ = 0;
}

// A run being formed: its rows (indexes into meta_) and totals.
struct CallBlock::Run {
  uint32_t index = 0;  // in the order runs were opened
  uint32_t first = 0;
  uint32_t calls = 0, timed = 0;
  bool mixed = false;  // of more than one kernel: the run keeps their counts, not one func
  int64_t end = 0, sum = 0, min = INT64_MAX, max = 0, nested = 0;
};

void CallBlock::write_run(const Run& r, std::string_view funcs, ColumnBlock& out) const {
  const Meta& f = meta_[r.first];
  out.set_int(kRunId, f.id);
  out.set_text(kRunNode, cols_.text(r.first, kCallNode));
  out.set_int(kRunSession, cols_.int64(r.first, kCallSession));
  out.set_int(kRunTs, f.ts);
  out.set_int(kRunSpan, r.end - f.ts);
  out.set_int(kRunPid, f.pid);
  out.set_int(kRunTid, f.tid);
  out.set_text(kRunComm, comms_[f.comm]);
  out.set_int(kRunCgroup, f.cgroup);
  out.set_int(kRunSource, f.source);
  out.set_int(kRunOp, f.op);
  if (f.library >= 0) out.set_int(kRunLibrary, f.library);
  if (cols_.has(r.first, kStreamCol)) out.set_int(kRunStream, f.stream);
  if (cols_.has(r.first, kDeviceCol)) out.set_int(kRunDevice, f.device);
  out.set_int(kRunCalls, r.calls);
  out.set_int(kRunSum, r.sum);
  out.set_int(kRunMin, r.timed ? r.min : 0);
  out.set_int(kRunMax, r.max);
  out.set_int(kRunNested, r.nested);
  out.set_int(kRunStack, cols_.int64(r.first, kCallStack));
  out.set_int(kRunFirstCall, f.id);
  out.set_int(kRunTimed, r.timed);
  if (!r.mixed && cols_.has(r.first, kFuncCol)) out.set_int(kRunFunc, f.func);
  if (r.mixed && !funcs.empty()) out.set_text(kRunFuncs, funcs);
  out.end_row();
}

// Per run of several kernels (by Run::index), how many of its calls launched each function:
// "func:count,+delta:count,..." by function (engine/call_run.h reads it). "" for the other runs,
// and for a run of more than kMaxRunKernels kernels or with a launch whose function is unknown.
// Empty when no run is of several kernels.
std::vector<std::string> CallBlock::kernels_of_runs(const std::vector<Run>& done,
                                                    const std::vector<uint32_t>& run_of,
                                                    uint32_t runs) const {
  std::vector<uint8_t> mixed(runs, 0);
  bool any = false;
  for (const Run& r : done) any |= (mixed[r.index] = r.mixed);
  if (!any) return {};
  std::vector<std::pair<uint32_t, int64_t>> launched;  // (run, function) of each call
  for (size_t i = 0; i < meta_.size(); ++i)
    if (run_of[i] != UINT32_MAX && mixed[run_of[i]])
      launched.emplace_back(run_of[i], meta_[i].func);
  std::sort(launched.begin(), launched.end());
  std::vector<std::string> out(runs);
  std::vector<std::pair<uint64_t, int64_t>> counts;  // (launches, function) of one run
  for (size_t i = 0; i < launched.size();) {
    uint32_t run = launched[i].first;
    counts.clear();
    bool known = true;
    for (size_t j = i; i < launched.size() && launched[i].first == run; i = j) {
      while (j < launched.size() && launched[j] == launched[i]) ++j;
      known = known && launched[i].second >= 0;
      counts.emplace_back(j - i, launched[i].second);
    }
    if (!known || counts.size() > kMaxRunKernels) continue;
    // By function (as sorted), the first whole and each next one as its distance from the one
    // before: the runs of a loop then differ in their counts alone, and a program's kernels lie
    // near each other (bench/trace_gen's run blocks: 4.24 MB with whole functions, 2.54 MB so;
    // docs/performance.md).
    std::string& text = out[run];
    int64_t prev = 0;
    for (const auto& [n, func] : counts) {
      if (text.empty())
        text = std::to_string(func);
      else
        text += ",+" + std::to_string(func - prev);
      text += ':' + std::to_string(n);
      prev = func;
    }
  }
  return out;
}

void CallBlock::fold(const FoldLimitFn& limit, FoldedCalls& out, bool enabled) const {
  out.kept.clear();
  out.runs.clear();
  out.folded = 0;
  size_t n = meta_.size();
  out.kept_rows = n;
  std::vector<uint8_t> foldable(n, 0);
  bool any = false;
  for (size_t i = 0; i < n && enabled; ++i) {
    const Meta& m = meta_[i];
    bool f = m.launch && m.on_cpu && (!m.timed || m.ok);
    if (f && m.timed) {
      auto l = limit(m.pid, m.source, m.op);
      f = l && m.dur < *l;
    }
    foldable[i] = f;
    any |= f;
  }
  // Nothing may fold (a block of allocations, syncs or copies): the block stays whole, without
  // the sort, the runs' search and a copy of every row that it would otherwise cost.
  if (!any) return;
  // Folding takes the calls by start (ties: id, the order they came in).
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  // Calls mostly come in that order already: the sort's merge passes (2% of the tracer's CPU on
  // a launch loop) only where they do not.
  auto by_start = [&](uint32_t a, uint32_t b) { return meta_[a].ts < meta_[b].ts; };
  if (!std::is_sorted(order.begin(), order.end(), by_start))
    std::stable_sort(order.begin(), order.end(), by_start);
  // A call inside another call of its thread keeps its row, and so does the other: spread over
  // a run, the inner one would no longer be inside.
  std::unordered_map<uint64_t, uint32_t> outer;
  for (uint32_t i : order) {
    const Meta& w = meta_[i];
    uint64_t thread = uint64_t(w.pid) << 32 | w.tid;
    auto [it, fresh] = outer.try_emplace(thread, i);
    if (fresh) continue;
    const Meta& o = meta_[it->second];
    if (w.ts < o.ts + o.dur) {
      foldable[it->second] = foldable[i] = 0;
      if (w.ts + w.dur <= o.ts + o.dur) continue;
    }
    it->second = i;
  }
  // Open runs by (pid, tid, source, op): launches of different ops interleaved on a thread each
  // make their own. A kept launch closes its thread's runs; a kept call of another kind (a
  // sync, a copy) closes every run of its process, so gaps and round trips stay where they were.
  // A run keeps its kernel when all its launches are of one, else how many launches of each
  // (kernels_of_runs): runs split by kernel would be spread apart from each other, and the
  // step model's counts move.
  using Key = std::tuple<uint32_t, uint32_t, int, int>;
  std::map<Key, Run> open;
  std::vector<Run> done;
  std::vector<uint32_t> run_of(n, UINT32_MAX);  // a folded call's run, by Run::index
  uint32_t runs = 0;
  auto close_while = [&](auto it, auto same) {
    while (it != open.end() && same(it->first)) {
      done.push_back(it->second);
      it = open.erase(it);
    }
  };
  for (uint32_t i : order) {
    const Meta& w = meta_[i];
    if (!foldable[i]) {
      close_while(open.lower_bound({w.pid, w.tid, INT32_MIN, INT32_MIN}),
                  [&](const Key& k) { return std::get<0>(k) == w.pid && std::get<1>(k) == w.tid; });
      if (!w.launch)
        close_while(open.lower_bound({w.pid, 0, INT32_MIN, INT32_MIN}),
                    [&](const Key& k) { return std::get<0>(k) == w.pid; });
      continue;
    }
    Key k{w.pid, w.tid, w.source, w.op};
    auto it = open.find(k);
    if (it != open.end()) {
      const Run& r = it->second;
      if (!w.same_run(meta_[r.first]) || w.ts - r.end > kMaxRunGapNs || w.ts < r.end) {
        done.push_back(r);
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      it = open.emplace(k, Run{}).first;
      it->second.first = i;
      it->second.index = runs++;
    }
    Run& r = it->second;
    run_of[i] = r.index;
    if (r.calls && w.func != meta_[r.first].func) r.mixed = true;
    ++r.calls;
    r.end = std::max(r.end, w.ts + w.dur);
    r.nested += w.nested;
    if (w.timed) {
      ++r.timed;
      r.sum += w.dur;
      r.min = std::min(r.min, w.dur);
      r.max = std::max(r.max, w.dur);
    }
  }
  for (auto& [k, r] : open) done.push_back(r);
  std::sort(done.begin(), done.end(), [&](const Run& a, const Run& b) {
    return std::pair(meta_[a.first].ts, meta_[a.first].id) <
           std::pair(meta_[b.first].ts, meta_[b.first].id);
  });
  std::vector<std::string> funcs = kernels_of_runs(done, run_of, runs);
  for (const Run& r : done) {
    write_run(r, funcs.empty() ? std::string_view() : funcs[r.index], out.runs);
    out.folded += r.calls;
  }
  out.kept_rows = n - out.folded;
  if (!out.folded) return;  // calls inside others: the block stays whole
  // Every call still foldable is in one run: the others keep their rows.
  for (uint8_t& f : foldable) f = !f;
  out.kept.add_rows(cols_, foldable);
}

}  // namespace ingero::store
