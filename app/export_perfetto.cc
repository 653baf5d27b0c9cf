#include "app/export_perfetto.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>

#include "engine/analysis.h"

namespace ingero::app {

void Emitter::emit(const nlohmann::json& j) {
  if (!status_) return;
  line_.assign(first_ ? "" : ",\n");
  line_ += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  status_ = out_.write(line_);
  first_ = false;
  ++count_;
}

Status Emitter::finish() {
  if (!status_) return status_;
  if (auto st = out_.write("\n]\n"); !st) return st;
  return out_.commit();
}

namespace {

const char* severity_color(engine::Severity s) {
  switch (s) {
    case engine::Severity::kHigh:
      return "bad";
    case engine::Severity::kMedium:
      return "yellow";
    default:
      return "good";
  }
}

class PerfettoWriter {
 public:
  PerfettoWriter(engine::TraceSource& source, Emitter& em) : source_(source), em_(em) {}

  void node(const std::string& node, const engine::Window& w) {
    node_ = node;
    names_ = source_.processes_of(w.node);
    calls(w);
    host_events(w);
    chains(w);
  }

 private:
  // Perfetto wants small integers for tracks: (node, pid) -> track, named at its first use:
  // "trainer (pid 7)", or "pid 7" for a process without a name (never "pid 7 (pid 7)").
  int track(uint32_t pid, std::string_view comm) {
    auto [it, fresh] = tracks_.try_emplace({node_, pid}, int(tracks_.size()) + 1);
    if (fresh) {
      std::string known = names_.count(pid) ? names_[pid].name : std::string(comm);
      std::string id = "pid " + std::to_string(pid);
      std::string name = (node_.empty() ? "" : node_ + " / ") +
                         (known.empty() || known == id ? id : known + " (" + id + ")");
      em_.emit({{"name", "process_name"},
                {"ph", "M"},
                {"ts", 0},
                {"pid", it->second},
                {"args", {{"name", name}}}});
    }
    return it->second;
  }

  nlohmann::json event_json(const hal::Event& e, const std::string& cat) {
    nlohmann::json j = {{"name", std::string(e.op)},
                        {"cat", cat},
                        {"ts", double(e.ts_ns) / 1000.0},
                        {"pid", track(e.pid, e.comm_view())},
                        {"tid", e.tid}};
    if (e.dur_ns || !hal::is_host_kind(e.kind)) {
      j["ph"] = "X";
      j["dur"] = double(e.dur_ns) / 1000.0;
    } else {
      j["ph"] = "i";
      j["s"] = "t";
    }
    nlohmann::json args = nlohmann::json::object();
    if (e.has_ret) args["ret"] = e.ret;
    if (auto b = e.get(hal::Field::kBytes)) args["bytes"] = *b;
    if (e.off_cpu_ns) args["off_cpu_us"] = double(e.off_cpu_ns) / 1000.0;
    if (e.peer_comm[0]) args["peer"] = std::string(e.peer_comm_view());
    if (!e.timed && !hal::is_host_kind(e.kind)) args["untimed"] = true;
    if (!args.empty()) j["args"] = args;
    return j;
  }

  // The calls as the trace stores them: where it keeps their times (a file within
  // --full-rows), a launch of a run is drawn at its own start, not spread over the run. A call
  // seen at entry only (a launch not timed through its return) has its op's mean for a
  // duration: its slice ends where its thread's next call begins, if sooner. Drawn at the
  // mean, 48,778 of 100,998 slices of a trace began inside the one before on their thread, as
  // no thread runs them.
  void calls(const engine::Window& w) {
    std::map<std::pair<int, uint32_t>, nlohmann::json> held;  // (track, tid) -> untimed slice
    auto release = [&](nlohmann::json& j, std::optional<double> next_us) {
      if (next_us)
        j["dur"] = std::clamp(*next_us - j["ts"].get<double>(), 0.0, j["dur"].get<double>());
      em_.emit(j);
    };
    source_.stored_calls(w, [&](const hal::Event& e) {
      // CUDA keeps its two categories; every other API is its own (hip, nccl, ibverbs, ...).
      nlohmann::json j = event_json(e, e.api == "cuda_driver"    ? "driver"
                                       : e.api == "cuda_runtime" ? "cuda"
                                                                 : std::string(e.api));
      auto key = std::make_pair(j["pid"].get<int>(), e.tid);
      if (auto it = held.find(key); it != held.end()) {
        release(it->second, double(e.ts_ns) / 1000.0);
        held.erase(it);
      }
      if (e.timed)
        em_.emit(j);
      else
        held.emplace(key, std::move(j));
    });
    for (auto& [key, j] : held) release(j, std::nullopt);
  }

  // A host interval crosses its thread's calls rather than nesting in them (a switch out
  // begins inside one call and ends in the next; a block read spans several), and Perfetto
  // drops a complete event that overlaps another of its thread without nesting in it: 391 of
  // an H100 trace's slices, an NCCL init among them. Each is an async slice (a begin and an
  // end of one id), which Perfetto puts on a track of its own beside the thread's.
  void host_events(const engine::Window& w) {
    source_.host_events(w, [&](const hal::Event& e) {
      nlohmann::json j = event_json(e, e.kind == hal::EventKind::kBlockIo         ? "io"
                                       : e.kind == hal::EventKind::kTcpRetransmit ? "net"
                                                                                  : "host");
      if (j["ph"] != "X") {
        em_.emit(j);
        return;
      }
      const double end = j["ts"].get<double>() + j["dur"].get<double>();
      j.erase("dur");
      j["ph"] = "b";
      j["id"] = ++async_ids_;
      em_.emit(j);
      em_.emit({{"name", j["name"]},
                {"cat", j["cat"]},
                {"ph", "e"},
                {"ts", end},
                {"pid", j["pid"]},
                {"tid", j["tid"]},
                {"id", async_ids_}});
    });
  }

  void chains(const engine::Window& w) {
    engine::EngineOptions eo;
    eo.breakdown = false;
    engine::Analysis a = engine::analyze(source_, w, eo);
    for (const auto& c : a.chains) {
      int pid = c.pids.empty() ? track(0, "host") : track(c.pids.front(), "");
      int64_t ts = c.window_start ? c.window_start : a.span.first;
      em_.emit({{"name", std::string(engine::severity_name(c.severity)) + ": " + c.summary},
                {"cat", "causal_chain"},
                {"ph", "i"},
                {"ts", double(ts) / 1000.0},
                {"pid", pid},
                {"s", "g"},
                {"cname", severity_color(c.severity)},
                {"args",
                 {{"severity", engine::severity_name(c.severity)},
                  {"root_cause", c.root_cause},
                  {"recommendations", c.fixes},
                  {"rule", c.rule}}}});
    }
  }

  engine::TraceSource& source_;
  Emitter& em_;
  std::string node_;
  std::map<uint32_t, engine::ProcessInfo> names_;
  std::map<std::pair<std::string, uint32_t>, int> tracks_;
  uint64_t async_ids_ = 0;
};

}  // namespace

void write_perfetto(engine::TraceSource& source, const engine::Window& base,
                    const std::vector<std::string>& nodes, bool by_node,
                    const std::function<void(const std::optional<std::string>&)>& scope,
                    Emitter& em) {
  PerfettoWriter writer(source, em);
  for (const std::string& node : nodes) {
    engine::Window w = base;
    if (!node.empty() && by_node) w.node = node;
    if (scope) scope(node.empty() ? std::nullopt : std::optional<std::string>(node));
    writer.node(node, w);
  }
  if (scope) scope(std::nullopt);
}

}  // namespace ingero::app
