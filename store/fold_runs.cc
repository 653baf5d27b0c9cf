#include "store/fold_runs.h"

#include <map>
#include <string_view>
#include <tuple>

#include "engine/quantile_sketch.h"
#include "store/sketch_sql.h"

namespace ingero::store {

ingero::Status read_limits(Db& db, FoldLimits& f) {
  f = FoldLimits{};
  auto st = db.prepare(
      "SELECT s.id, o.op_id, o.kind FROM sources s LEFT JOIN ops o ON o.source_id = s.id "
      "WHERE s.vendor <> 'host'");
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    f.call_sources.insert(int(st->int64(0)));
    if (st->text_view(2) == "launch") f.launch_ops.insert({int(st->int64(0)), int(st->int64(1))});
  }
  std::map<std::tuple<std::string, uint32_t, int, int>, engine::QuantileSketch> sketches;
  auto sums = db.prepare("SELECT node, pid, source, op, sketch FROM call_seconds");
  if (!sums) return sums.error();
  while (true) {
    auto r = sums->step();
    if (!r) return r.error();
    if (!*r) break;
    int source = int(sums->int64(2)), op = int(sums->int64(3));
    if (!f.launch_ops.count({source, op})) continue;
    auto sk = sketch_column(sums->get(), 4);
    if (!sk) return ingero::make_error(db.path() + ": a damaged call_seconds sketch");
    sketches[{sums->text(0), uint32_t(sums->int64(1)), source, op}].merge(*sk);
  }
  for (const auto& [k, sk] : sketches)
    f.limit[k] = int64_t(double(sk.quantile(0.95)) * kKeepAboveP95Share);
  return {};
}

ingero::Status refresh_limits(Db& db, FoldLimits& f, int64_t at_ns) {
  constexpr int64_t kReread = int64_t(30) * 1000000000;
  if (f.read_for_ns != INT64_MIN && at_ns - f.read_for_ns <= kReread) return {};
  if (auto st = read_limits(db, f); !st) return st;
  f.read_for_ns = at_ns;
  return {};
}

ingero::Status decide_foldable(Db& db, FoldLimits& lim, FoldRow& w, bool eligible, bool& reread) {
  bool launch = lim.launch_ops.count({w.source, w.op}) > 0;
  using Key = std::tuple<std::string_view, uint32_t, int, int>;
  auto l = lim.limit.find(Key{w.node, w.pid, w.source, w.op});
  if (launch && l == lim.limit.end() && !reread) {  // a process or op new since the last read
    int64_t read_for = lim.read_for_ns;
    if (auto st = read_limits(db, lim); !st) return st;
    lim.read_for_ns = read_for;
    reread = true;
    l = lim.limit.find(Key{w.node, w.pid, w.source, w.op});
  }
  w.foldable = eligible && launch && l != lim.limit.end() && w.dur < l->second;
  return {};
}

void keep_nested(std::vector<FoldRow>& rows) {
  std::map<std::tuple<std::string_view, int64_t, uint32_t, uint32_t>, FoldRow*> outer;
  for (FoldRow& w : rows) {
    if (!w.call) continue;
    FoldRow*& o = outer[{w.node, w.session, w.pid, w.tid}];
    if (o && w.ts < o->ts + o->dur) {
      o->foldable = w.foldable = false;
      if (w.ts + w.dur <= o->ts + o->dur) continue;
    }
    o = &w;
  }
}

ingero::Status form_runs(const std::vector<FoldRow>& rows, const FoldLimits& lim,
                         const std::function<ingero::Status(const FoldRun&)>& fn) {
  // Open runs by (node, session, pid, tid, source, op): launches of different ops interleaved
  // on a thread (cudaLaunchKernel, cuLaunchKernelEx) each make their own run. A kept call
  // other than a launch (a sync, a copy, an allocation) closes every run of its process, so the
  // gaps and round trips around it stay where they were; a kept launch (slow, failed, off-CPU)
  // closes the runs of its thread only.
  using RunKey = std::tuple<std::string_view, int64_t, uint32_t, uint32_t, int, int>;
  std::map<RunKey, FoldRun> open;
  // Closes the open runs from `it` on while `same` holds of their key.
  auto close_while = [&](auto it, auto same) -> ingero::Status {
    while (it != open.end() && same(it->first)) {
      if (auto st = fn(it->second); !st) return st;
      it = open.erase(it);
    }
    return {};
  };
  for (const FoldRow& w : rows) {
    if (!w.foldable) {
      if (!w.call) continue;
      // Runs never span a kept call of their thread: spread over the run, folded calls would
      // land inside it and read as nested in it.
      auto thread = [&](const RunKey& k) {
        return std::get<3>(k) == w.tid && std::get<2>(k) == w.pid && std::get<0>(k) == w.node &&
               std::get<1>(k) == w.session;
      };
      if (auto st = close_while(open.lower_bound({w.node, w.session, w.pid, w.tid, 0, 0}), thread);
          !st)
        return st;
      if (lim.launch_ops.count({w.source, w.op})) continue;
      auto process = [&](const RunKey& k) {
        return std::get<2>(k) == w.pid && std::get<0>(k) == w.node && std::get<1>(k) == w.session;
      };
      if (auto st = close_while(open.lower_bound({w.node, w.session, w.pid, 0, 0, 0}), process);
          !st)
        return st;
      continue;
    }
    RunKey k{w.node, w.session, w.pid, w.tid, w.source, w.op};
    auto it = open.find(k);
    if (it != open.end()) {
      const FoldRow& f = it->second.first();
      bool same = f.stream == w.stream && f.device == w.device && f.library == w.library &&
                  f.comm == w.comm && f.cgroup == w.cgroup;
      if (!same || w.ts - it->second.end > kMaxRunGapNs || w.ts < it->second.end) {
        if (auto st = fn(it->second); !st) return st;
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) it = open.emplace(k, FoldRun{}).first;
    FoldRun& r = it->second;
    r.calls.push_back(&w);
    r.end = std::max(r.end, w.ts + w.dur);
    r.sum += w.dur;
    r.min = std::min(r.min, w.dur);
    r.max = std::max(r.max, w.dur);
    r.nested += w.nested;
  }
  for (auto& [k, r] : open)
    if (auto st = fn(r); !st) return st;
  return {};
}

ingero::Result<Stmt> prepare_run_insert(Db& db) {
  return db.prepare(
      "INSERT INTO call_runs (node, session_id, timestamp, span_ns, pid, tid, comm, cgroup_id, "
      "source, op, library_id, stream, device, calls, sum_ns, min_ns, max_ns, nested_calls, "
      "stack_hash, first_call_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?)");
}

ingero::Status insert_run(Stmt& ins, const FoldRun& r, bool with_first_id) {
  const FoldRow& f = r.first();
  ins.reset();
  sqlite3_clear_bindings(ins.get());
  ins.bind(1, std::string_view(f.node))
      .bind(2, f.session)
      .bind(3, f.ts)
      .bind(4, r.end - f.ts)
      .bind(5, int64_t(f.pid))
      .bind(6, int64_t(f.tid))
      .bind(7, std::string_view(f.comm))
      .bind(8, f.cgroup)
      .bind(9, int64_t(f.source))
      .bind(10, int64_t(f.op))
      .bind(14, int64_t(r.calls.size()))
      .bind(15, r.sum)
      .bind(16, r.min)
      .bind(17, r.max)
      .bind(18, r.nested)
      .bind(19, f.stack);
  if (with_first_id) ins.bind(20, f.id);
  if (f.library) ins.bind(11, *f.library);
  if (f.stream) ins.bind(12, *f.stream);
  if (f.device) ins.bind(13, *f.device);
  if (auto s = ins.step(); !s) return s.error();
  return {};
}

}  // namespace ingero::store
