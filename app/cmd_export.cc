// `ingero export --format perfetto`: Chrome trace-event JSON that ui.perfetto.dev and
// chrome://tracing open. One process track per (node, pid), one thread track per tid, calls
// and host intervals as complete events, causal chains as global instant markers coloured by
// severity.
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/commands.h"
#include "engine/analysis.h"
#include "engine/fleet.h"
#include "fleet/clickhouse_source.h"
#include "store/sql_trace_source.h"

namespace ingero::app {
namespace {

class Emitter {
 public:
  explicit Emitter(std::ostream& out) : out_(out) { out_ << "[\n"; }
  void emit(const nlohmann::json& j) {
    out_ << (first_ ? "" : ",\n")
         << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    first_ = false;
    ++count_;
  }
  ~Emitter() { out_ << "\n]\n"; }
  size_t count() const { return count_; }

 private:
  std::ostream& out_;
  bool first_ = true;
  size_t count_ = 0;
};

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

// Writes the nodes' calls, host events and chains; returns the number of trace events.
size_t write_perfetto(engine::TraceSource& source, const std::vector<std::string>& nodes,
                      const std::function<void(const std::optional<std::string>&)>& scope,
                      std::ostream& out) {
  size_t emitted = 0;
  std::map<uint32_t, engine::ProcessInfo> names;
  {
    Emitter em(out);
    // Track ids: Perfetto wants small integers; (node, pid) -> track.
    std::map<std::pair<std::string, uint32_t>, int> tracks;
    std::map<std::string, int> node_tracks;
    auto track = [&](const std::string& node, uint32_t pid, std::string_view comm) {
      auto [it, fresh] = tracks.try_emplace({node, pid}, int(tracks.size()) + 1);
      if (fresh) {
        std::string name = (node.empty() ? "" : node + " / ") +
                           (names.count(pid) ? names[pid].name : std::string(comm)) + " (pid " +
                           std::to_string(pid) + ")";
        em.emit({{"name", "process_name"},
                 {"ph", "M"},
                 {"ts", 0},
                 {"pid", it->second},
                 {"args", {{"name", name}}}});
      }
      return it->second;
    };
    for (const std::string& node : nodes) {
      engine::Window w;
      if (!node.empty() && nodes.size() > 1) w.node = node;
      if (scope) scope(node.empty() ? std::nullopt : std::optional<std::string>(node));
      names = source.processes();
      auto emit_event = [&](const hal::Event& e, const char* cat) {
        int pid = track(node, e.pid, e.comm_view());
        nlohmann::json j = {{"name", std::string(e.op)},
                            {"cat", cat},
                            {"ts", double(e.ts_ns) / 1000.0},
                            {"pid", pid},
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
        if (!args.empty()) j["args"] = args;
        em.emit(j);
      };
      source.calls(w, [&](const hal::Event& e) {
        emit_event(e, std::string(e.api) == "cuda_driver" ? "driver" : "cuda");
      });
      source.host_events(w, [&](const hal::Event& e) {
        emit_event(e, e.kind == hal::EventKind::kBlockIo         ? "io"
                      : e.kind == hal::EventKind::kTcpRetransmit ? "net"
                                                                 : "host");
      });
      engine::EngineOptions eo;
      eo.breakdown = false;
      engine::Analysis a = engine::analyze(source, w, eo);
      for (const auto& c : a.chains) {
        int pid = c.pids.empty() ? track(node, 0, "host") : track(node, c.pids.front(), "");
        int64_t ts = c.window_start ? c.window_start : a.span.first;
        em.emit({{"name", std::string(engine::severity_name(c.severity)) + ": " + c.summary},
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
    emitted = em.count();
  }
  if (scope) scope(std::nullopt);
  return emitted;
}

}  // namespace

void add_export_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "export",
      "Export a trace for visual timelines: --format perfetto writes Chrome trace-event JSON\n"
      "that ui.perfetto.dev opens (one process track per node and pid, chains as markers).");
  struct Opts {
    std::string format = "perfetto", db, out, source;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--format", o->format, "Output format")
      ->check(CLI::IsMember({"perfetto"}))
      ->capture_default_str();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)");
  cmd->add_option("--source", o->source,
                  "Export a fleet from ClickHouse instead of a file: clickhouse://HOST:8123/DB "
                  "(one timeline: node clock offsets removed)");
  cmd->add_option("-o,--out", o->out, "Output file (default: stdout)");
  cmd->callback([&ctx, o] {
    if (!o->source.empty() && !o->db.empty()) {
      std::cerr << "ingero export: give either --db or --source\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    std::ofstream file;
    if (!o->out.empty()) {
      file.open(o->out);
      if (!file) {
        std::cerr << "ingero export: cannot write " << o->out << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
    }
    std::ostream& out = o->out.empty() ? std::cout : file;
    size_t emitted = 0;
    std::string error;
    if (!o->source.empty()) {
      auto ep = fleet::parse_endpoint(o->source, true);
      if (!ep) {
        std::cerr << "ingero export: " << ep.error().message << "\n";
        ctx.exit_code = kExitUsage;
        return;
      }
      fleet::ClickHouseTraceSource source(std::make_unique<fleet::ClickHouseClient>(*ep));
      std::vector<std::string> nodes = source.nodes();
      // One timeline: each node's clock offset is removed (engine/fleet.h).
      if (nodes.size() > 1 && source.error().empty())
        source.set_clock_offsets(engine::clock_shift(engine::estimate_clock_offsets(
            engine::gather_fleet_collectives(source, engine::Window{}, nodes), nodes)));
      if (source.error().empty())
        emitted = write_perfetto(
            source, nodes, [&](const std::optional<std::string>& n) { source.set_scope(n); }, out);
      error = source.error();
    } else {
      std::string path = o->db.empty() ? default_db_path() : o->db;
      auto reader = store::TraceReader::open(path);
      if (!reader) {
        std::cerr << "ingero export: " << reader.error().message << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
      store::SqlTraceSource source(**reader);
      std::vector<std::string> nodes = source.nodes();
      if (nodes.empty()) nodes = {""};
      emitted = write_perfetto(source, nodes, nullptr, out);
      error = source.error();
    }
    if (!error.empty()) {
      std::cerr << "ingero export: " << error << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    if (!o->out.empty())
      std::cerr << "ingero export: " << emitted << " trace events written to " << o->out << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
