// `ingero export --format perfetto`: Chrome trace-event JSON that ui.perfetto.dev and
// chrome://tracing open. One process track per (node, pid), one thread track per tid, calls
// and host intervals as complete events, causal chains as global instant markers coloured by
// severity.
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/analysis.h"
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

}  // namespace

void add_export_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "export",
      "Export a trace for visual timelines: --format perfetto writes Chrome trace-event JSON\n"
      "that ui.perfetto.dev opens (one process track per node and pid, chains as markers).");
  struct Opts {
    std::string format = "perfetto", db, out;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--format", o->format, "Output format")
      ->check(CLI::IsMember({"perfetto"}))
      ->capture_default_str();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)");
  cmd->add_option("-o,--out", o->out, "Output file (default: stdout)");
  cmd->callback([&ctx, o] {
    std::string path = o->db.empty() ? default_db_path() : o->db;
    auto reader = store::TraceReader::open(path);
    if (!reader) {
      std::cerr << "ingero export: " << reader.error().message << "\n";
      ctx.exit_code = kExitFailure;
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
    store::SqlTraceSource source(**reader);
    std::vector<std::string> nodes = source.nodes();
    if (nodes.empty()) nodes = {""};
    auto names = source.processes();
    size_t emitted = 0;
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
    if (!source.error().empty()) {
      std::cerr << "ingero export: " << source.error() << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    if (!o->out.empty())
      std::cerr << "ingero export: " << emitted << " trace events written to " << o->out << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
