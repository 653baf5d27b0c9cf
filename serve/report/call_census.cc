#include "serve/report/call_census.h"

#include <algorithm>
#include <optional>

#include "engine/call_run.h"
#include "hal/call_failure.h"

namespace ingero::serve::report {

using nlohmann::json;

void CallCount::add(int64_t ts, uint64_t n, uint64_t dur, int64_t end) {
  if (calls == 0 || ts < first_ns) first_ns = ts;
  if (calls == 0 || end > last_end_ns) last_end_ns = end;
  calls += n;
  busy_ns = busy_ns > UINT64_MAX - dur ? UINT64_MAX : busy_ns + dur;
}

namespace {

// A call's or a run's end: its start and length, saturated (a damaged duration must not wrap).
int64_t end_of(uint64_t ts, uint64_t dur) {
  return dur > uint64_t(INT64_MAX) - ts ? INT64_MAX : int64_t(ts + dur);
}

// The node's and the process's counts for a run of calls of one thread, found again only
// when the process changes (calls come in time order, mostly from one process at a time).
class Counter {
 public:
  Counter(CallCensus& c, const std::string& node) : c_(c), node_(c.nodes[node]), name_(node) {}

  void call(const hal::Event& e) {
    int64_t ts = int64_t(e.ts_ns);
    int64_t end = end_of(e.ts_ns, e.dur_ns);
    ProcessCount& p = process(e.pid, e.comm_view());
    p.threads.insert(e.tid);
    for (CallCount* k : {&c_.totals, &node_, static_cast<CallCount*>(&p)}) {
      k->add(ts, 1, e.dur_ns, end);
      if (e.unfinished)
        ++k->unfinished;
      else if (hal::is_failure(e))
        ++k->errors;
    }
    if (e.kind == hal::EventKind::kCollective) ++c_.collectives;
  }

  void run(const engine::CallRun& r) {
    ProcessCount& p = process(r.pid, r.comm_view());
    p.threads.insert(r.tid);
    int64_t end = end_of(uint64_t(r.ts_ns), r.span_ns);
    for (CallCount* k : {&c_.totals, &node_, static_cast<CallCount*>(&p)})
      k->add(r.ts_ns, r.calls, r.sum_ns, end);
  }

 private:
  ProcessCount& process(uint32_t pid, std::string_view comm) {
    if (!last_ || pid != last_pid_) {
      last_ = &c_.processes[{name_, pid}];
      last_pid_ = pid;
    }
    if (comm > last_->comm) last_->comm = comm;
    return *last_;
  }

  CallCensus& c_;
  CallCount& node_;
  std::string name_;
  ProcessCount* last_ = nullptr;
  uint32_t last_pid_ = 0;
};

json count_json(const CallCount& k) {
  return {{"calls", k.calls},
          {"errors", k.errors},
          {"unfinished", k.unfinished},
          {"busy_ns", k.busy_ns > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(k.busy_ns)},
          {"first_ns", k.first_ns},
          {"last_ns", k.last_end_ns}};
}

}  // namespace

CallCensus census_calls(engine::TraceSource& source, const std::vector<NodeWindow>& windows) {
  CallCensus c;
  for (const auto& nw : windows) {
    Counter counter(c, nw.node);
    source.call_runs(
        nw.window, [&](const hal::Event& e) { counter.call(e); },
        [&](const engine::CallRun& r) { counter.run(r); });
  }
  // A node read without calls is no row of its own here (nodes_json adds the names).
  for (auto it = c.nodes.begin(); it != c.nodes.end();)
    it = it->second.calls ? std::next(it) : c.nodes.erase(it);
  return c;
}

json nodes_json(const CallCensus& c, const std::vector<std::string>& names) {
  std::map<std::string, json> rows;
  for (const auto& n : names) {
    rows[n] = count_json(CallCount{});
    rows[n]["processes"] = 0;
  }
  std::map<std::string, uint64_t> processes;
  for (const auto& [key, p] : c.processes) ++processes[key.first];
  for (const auto& [name, k] : c.nodes) {
    rows[name] = count_json(k);
    rows[name]["processes"] = processes[name];
  }
  json out = json::array();
  for (auto& [name, row] : rows) {
    row["node"] = name;
    out.push_back(std::move(row));
  }
  return out;
}

Result<json> processes_json(store::Db& db, const CallCensus& c, size_t limit) {
  std::vector<const std::pair<const std::pair<std::string, uint32_t>, ProcessCount>*> order;
  for (const auto& p : c.processes) order.push_back(&p);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return a->second.calls != b->second.calls ? a->second.calls > b->second.calls
                                              : a->first < b->first;
  });
  if (order.size() > limit) order.resize(limit);
  // Names: process_names has (pid, name) in every file; cmdline and node in ours.
  std::optional<store::Stmt> names;
  bool by_node = false;
  if (db.table_exists("process_names")) {
    by_node = db.column_exists("process_names", "node");
    std::string cmd = db.column_exists("process_names", "cmdline") ? "cmdline" : "''";
    auto st = db.prepare("SELECT name, " + cmd + " FROM process_names WHERE pid = ?1" +
                         (by_node ? " AND node = ?2" : ""));
    if (!st) return make_error("reading process names: " + st.error().message);
    names = std::move(*st);
  }
  json out = json::array();
  for (const auto* entry : order) {
    const auto& [key, p] = *entry;
    std::string name, cmdline;
    if (names) {
      names->reset();
      names->bind(1, int64_t(key.second));
      if (by_node) names->bind(2, std::string_view(key.first));
      auto r = names->step();
      if (!r) return make_error("reading process names: " + r.error().message);
      if (*r) {
        name = names->text(0);
        cmdline = names->text(1);
      }
    }
    json row = count_json(p);
    row["node"] = key.first;
    row["pid"] = key.second;
    row["threads"] = p.threads.size();
    row["name"] = name.empty() ? p.comm : name;
    row["cmdline"] = cmdline;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace ingero::serve::report
