#include "store/folded_calls.h"

#include <algorithm>
#include <string>

#include "store/sqlite_db.h"

namespace ingero::store {

ingero::Result<FoldedCalls> FoldedCalls::load(Db& db, const EventFilter& f, StringPool& strings) {
  FoldedCalls out;
  out.from_ns_ = f.from_ns;
  out.to_ns_ = f.to_ns;
  if (!db.table_exists("call_runs")) return out;
  struct Names {
    std::string_view vendor, api, op;
    hal::EventKind kind;
  };
  std::map<std::pair<int64_t, int64_t>, Names> names;
  auto dict = db.prepare(
      "SELECT s.id, o.op_id, s.vendor, s.api, o.name, o.kind FROM sources s JOIN ops o ON "
      "o.source_id = s.id");
  if (!dict) return dict.error();
  while (true) {
    auto r = dict->step();
    if (!r) return r.error();
    if (!*r) break;
    names[{dict->int64(0), dict->int64(1)}] = {
        strings.intern(dict->text_view(2)), strings.intern(dict->text_view(3)),
        strings.intern(dict->text_view(4)),
        hal::kind_from_name(dict->text_view(5)).value_or(hal::EventKind::kUnknown)};
  }
  std::map<int64_t, std::string_view> libraries;
  if (db.table_exists("libraries")) {
    auto libs = db.prepare("SELECT id, path FROM libraries");
    if (!libs) return libs.error();
    while (true) {
      auto r = libs->step();
      if (!r) return r.error();
      if (!*r) break;
      libraries[libs->int64(0)] = strings.intern(libs->text_view(1));
    }
  }
  // A run overlaps the window when it starts before its end and ends after its start; runs
  // are shorter than a step, so the start index bounds the scan.
  std::string sql =
      "SELECT timestamp, span_ns, pid, tid, comm, cgroup_id, source, op, library_id, stream, "
      "device, calls, sum_ns, min_ns, max_ns, nested_calls, stack_hash FROM call_runs WHERE "
      "timestamp <= " +
      std::to_string(f.to_ns) + " AND timestamp + span_ns >= " + std::to_string(f.from_ns);
  if (f.pid) sql += " AND pid = " + std::to_string(*f.pid);
  if (f.node) sql += " AND node = " + sql_quote(*f.node);
  sql += " ORDER BY timestamp";
  auto st = db.prepare(sql);
  if (!st) return st.error();
  while (true) {
    auto r = st->step();
    if (!r) return r.error();
    if (!*r) break;
    auto n = names.find({st->int64(6), st->int64(7)});
    if (n == names.end()) continue;  // as the calls view: an op missing from the dictionary
    RunRow w;
    w.ts = st->int64(0);
    w.span = std::max<int64_t>(0, st->int64(1));
    w.pid = uint32_t(st->int64(2));
    w.tid = uint32_t(st->int64(3));
    auto comm = st->text_view(4);
    std::copy_n(comm.data(), std::min(comm.size(), w.comm.size() - 1), w.comm.data());
    w.cgroup = uint64_t(st->int64(5));
    w.vendor = n->second.vendor;
    w.api = n->second.api;
    w.op = n->second.op;
    w.kind = n->second.kind;
    if (!st->is_null(8))
      if (auto l = libraries.find(st->int64(8)); l != libraries.end()) w.library = l->second;
    if (!st->is_null(9)) w.stream = st->int64(9);
    if (!st->is_null(10)) w.device = st->int64(10);
    w.calls = uint64_t(std::max<int64_t>(0, st->int64(11)));
    w.sum = uint64_t(std::max<int64_t>(0, st->int64(12)));
    w.min = uint64_t(std::max<int64_t>(0, st->int64(13)));
    w.max = uint64_t(std::max<int64_t>(0, st->int64(14)));
    w.nested = uint64_t(std::max<int64_t>(0, st->int64(15)));
    w.stack = uint64_t(st->int64(16));
    // A damaged row (no calls, or extremes that do not fit the total) is not expanded into
    // invented calls.
    if (w.calls == 0 || w.min > w.max || w.sum < w.min + (w.calls > 1 ? w.max : 0) ||
        (w.calls > 1 && w.sum > w.max * w.calls))
      return ingero::make_error(db.path() +
                                ": a damaged call_runs row (its count, total and "
                                "extremes do not fit together)");
    out.runs_.push_back(w);
  }
  out.cursors_.resize(out.runs_.size());
  return out;
}

// Call k's duration: the minimum first, the maximum last, the rest of the total evenly.
uint64_t FoldedCalls::duration(const RunRow& r, uint64_t k) const {
  if (r.calls == 1) return r.sum;
  if (k == 0) return r.min;
  if (k == r.calls - 1) return r.max;
  uint64_t rest = r.sum - r.min - r.max, middle = r.calls - 2;
  return rest / middle + (k - 1 < rest % middle ? 1 : 0);
}

// The idle time after call k: what the span leaves beyond the total, evenly.
uint64_t FoldedCalls::gap(const RunRow& r, uint64_t k) const {
  if (r.calls < 2) return 0;
  uint64_t idle = uint64_t(r.span) > r.sum ? uint64_t(r.span) - r.sum : 0;
  uint64_t gaps = r.calls - 1;
  return idle / gaps + (k < idle % gaps ? 1 : 0);
}

void FoldedCalls::activate_started(int64_t upto) {
  while (next_run_ < runs_.size() && runs_[next_run_].ts <= upto) {
    cursors_[next_run_] = {0, runs_[next_run_].ts};
    active_.push({runs_[next_run_].ts, next_run_});
    ++next_run_;
  }
}

int64_t FoldedCalls::next_ts() const {
  int64_t t = active_.empty() ? INT64_MAX : active_.top().first;
  if (next_run_ < runs_.size()) t = std::min(t, runs_[next_run_].ts);
  return t;
}

bool FoldedCalls::next(hal::Event& e) {
  activate_started(next_ts());
  auto [ts, i] = active_.top();
  active_.pop();
  const RunRow& r = runs_[i];
  Cursor& c = cursors_[i];
  uint64_t dur = duration(r, c.k);
  uint64_t k = c.k;
  if (++c.k < r.calls) active_.push({ts + int64_t(dur + gap(r, k)), i});
  if (ts < from_ns_ || ts > to_ns_) return false;
  e = hal::Event{};
  e.ts_ns = uint64_t(ts);
  e.dur_ns = dur;
  e.pid = r.pid;
  e.tid = r.tid;
  e.comm = r.comm;
  e.cgroup_id = r.cgroup;
  e.vendor = r.vendor;
  e.api = r.api;
  e.op = r.op;
  e.kind = r.kind;
  e.library = r.library;
  e.has_ret = true;
  e.ret = 0;
  e.stack_id = r.stack;
  e.stack_of_site = k > 0;  // the run's first stack stands for its site
  e.nested = uint32_t(r.nested / r.calls + (k < r.nested % r.calls ? 1 : 0));
  if (r.stream) e.set(hal::Field::kStream, uint64_t(*r.stream));
  if (r.device) e.set(hal::Field::kDevice, uint64_t(*r.device));
  return true;
}

}  // namespace ingero::store
