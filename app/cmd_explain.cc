#include <algorithm>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/explain_report.h"
#include "app/fleet_explain.h"
#include "app/terminal_text.h"
#include "app/window_flags.h"
#include "engine/chain.h"
#include "engine/fleet.h"
#include "engine/node_selection.h"
#include "engine/window_spec.h"
#include "fleet/clickhouse_source.h"
#include "hal/memory.h"
#include "store/inflight_rows.h"
#include "store/legacy_views.h"
#include "store/read_snapshot.h"
#include "store/sql_trace_source.h"

namespace ingero::app {
namespace {

struct Opts {
  std::string db, source;
  std::vector<std::string> nodes;
  engine::WindowSpec w;
  uint32_t pid = 0;
  bool per_process = false, json = false, all_chains = false;
  std::string group_by;  // "", "pod", "container"
};

std::optional<engine::TenantGrouping> grouping(const std::string& g) {
  if (g == "pod") return engine::TenantGrouping::kPod;
  if (g == "container") return engine::TenantGrouping::kContainer;
  return std::nullopt;
}

// Two hosts traced under one --node are one machine to the fleet: their processes, clocks and
// stacks are mixed, and nothing said so (ship says it too, fleet/shipper.cc).
void warn_shared_nodes(fleet::ClickHouseTraceSource& source,
                       const std::vector<std::string>& nodes) {
  for (const auto& [node, hosts] : source.shared_nodes()) {
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) continue;
    std::string list;
    for (const std::string& h : hosts) list += (list.empty() ? "'" : ", '") + h + "'";
    TerminalText(std::cerr) << "ingero explain: node '" << node << "' holds the sessions of "
                            << hosts.size() << " hosts (" << list
                            << "): they are read as one machine, their processes, clocks and "
                               "stacks mixed; trace each host with its own --node\n";
  }
}

int explain_clickhouse(const Opts& o) {
  auto ep = fleet::parse_endpoint(o.source);
  if (!ep) {
    std::cerr << "ingero explain: " << ep.error().message << "\n";
    return kExitUsage;
  }
  fleet::ClickHouseTraceSource source(std::make_unique<fleet::ClickHouseClient>(*ep));
  source.name_errors_with(builtin_error_codes());
  auto have = source.nodes();
  if (!source.error().empty()) {
    std::cerr << "ingero explain: " << source.error() << "\n";
    return kExitFailure;
  }
  if (have.empty()) {
    std::cerr << "ingero explain: no events in " << ep->display() << "\n";
    return kExitFailure;
  }
  auto nodes = engine::pick_nodes(have, o.nodes);
  if (!nodes) {
    std::cerr << "ingero explain: " << nodes.error().message << "\n";
    return kExitUsage;
  }
  warn_shared_nodes(source, *nodes);
  // The nodes' clocks first, over the whole fleet, and the window then on the reference clock:
  // resolved on the nodes' own clocks, --since 10s of a fleet with a node an hour ahead
  // counted back from that node's end, and every node's report was empty (export did it in
  // this order already).
  FleetExplainOptions fo;
  if (nodes->size() >= 2) {
    fo.clocks = engine::estimate_clock_offsets(
        engine::gather_fleet_collectives(source, engine::Window{}, *nodes), *nodes);
    if (!source.error().empty()) {
      std::cerr << "ingero explain: " << source.error() << "\n";
      return kExitFailure;
    }
    source.set_clock_offsets(engine::clock_shift(*fo.clocks));
  }
  engine::WindowSpec spec = o.w;
  if (o.pid) spec.pid = o.pid;
  auto w = engine::resolve_window(source, spec);
  if (!w) {
    std::cerr << "ingero explain: " << w.error().message << "\n";
    return kExitUsage;
  }
  // Pin the end: rows still arriving must not change the data between the engine's passes.
  if (w->to_ns == std::numeric_limits<int64_t>::max()) w->to_ns = source.time_span().second;
  fo.title = ep->display();
  fo.nodes = *nodes;
  fo.window = *w;
  fo.per_process = o.per_process;
  fo.json = o.json;
  fo.all_chains = o.all_chains;
  fo.group_by = grouping(o.group_by);
  fo.apply_offsets = [&](const engine::ClockShift& s) { source.set_clock_offsets(s); };
  fo.scope = [&](const std::optional<std::string>& n) { source.set_scope(n); };
  fo.error = [&] { return source.error(); };
  TerminalText text(std::cout);  // node and process names may hold escape sequences
  return explain_nodes(source, fo, o.json ? static_cast<std::ostream&>(std::cout) : text);
}

// Sessions whose tracer ended without stopping (SIGKILL, an OOM kill, a host that went down),
// none writing now: the trace ends at its last commit, and its loss counters are those last
// saved. explain read such a file as a whole trace, losses 0, without a word ("" when none).
std::string cut_short_words(store::Db& db, const std::string& path) {
  // A generated trace (bench/trace_gen, the demo) has no stop but says why in exit_reason.
  auto n = db.kept_int(
      "SELECT count(*) FROM sessions WHERE coalesce(stopped_at, 0) = 0 AND "
      "coalesce(exit_reason, '') = ''");
  if (!n || n->value_or(0) == 0 || store::trace_being_written(path)) return "";
  const int64_t k = n->value_or(0);
  return (k == 1 ? std::string("its session's") : std::to_string(k) + " sessions'") +
         " tracer ended without stopping (killed, or its host went down): the trace ends at its "
         "last commit, and its loss counts are those last saved";
}

int explain_file(const Opts& o) {
  std::string path = o.db.empty() ? default_db_path() : o.db;
  auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
  if (!reader) {
    std::cerr << "ingero explain: " << reader.error().message << "\n";
    return kExitFailure;
  }
  // Every figure of one explain from one state of the file: a trace being written commits
  // meanwhile, and its event count would not add up with its calls and host events. Declared
  // before the source, which it outlives.
  store::ReadSnapshot snapshot((*reader)->db());
  store::SqlTraceSource source(**reader);
  engine::WindowSpec spec = o.w;
  if (o.pid) spec.pid = o.pid;
  auto w = engine::resolve_window(source, spec);
  if (!w) {
    std::cerr << "ingero explain: " << w.error().message << "\n";
    return kExitUsage;
  }
  // A merged trace holds several nodes whose pids may collide: one analysis per node, and the
  // fleet rules across them.
  std::vector<std::string> have = source.nodes();
  auto nodes = engine::pick_nodes(
      have.size() < 2 && o.nodes.empty() ? std::vector<std::string>{""} : have, o.nodes);
  if (!nodes) {
    std::cerr << "ingero explain: " << nodes.error().message << "\n";
    return kExitUsage;
  }
  if (o.pid)
    if (auto st = engine::check_pid(source.processes(), o.pid); !st) {
      std::cerr << "ingero explain: " << st.error().message << "\n";
      return kExitUsage;
    }
  // A window that misses the trace is answered (nothing to explain), and said to miss it: a
  // --from in the wrong year or zone otherwise reads as a quiet trace.
  if (auto miss = engine::window_miss(source, *w, path); !miss.empty())
    std::cerr << "ingero explain: " << miss << "\n";
  else if (have.size() >= 2)
    for (const auto& n : *nodes)
      if (auto m = engine::node_window_miss(source, *w, n); !m.empty())
        std::cerr << "ingero explain: " << m << "\n";
  FleetExplainOptions fo;
  fo.title = path;
  if ((*reader)->is_legacy()) {
    fo.subtitle = (*reader)->format_name();
    // Those of the calls explained: the window's, the node's where it is one.
    std::optional<std::string> one_node;
    if (nodes->size() == 1 && !nodes->front().empty()) one_node = nodes->front();
    std::string sep = ": ";
    if (int64_t n = (*reader)->legacy_nested_calls(one_node, w->from_ns, w->to_ns)) {
      fo.subtitle += sep + engine::format_count(uint64_t(n)) +
                     std::string(store::folded_calls_words(n)) +
                     ", as ingero records them (one launch is one row; the file's own `events` "
                     "table keeps both)";
      sep = "; ";
    }
    // Damage the file holds (store/legacy_views.h), said beside its format as the report does.
    auto damage = store::legacy_damage_words((*reader)->db());
    if (!damage) {
      std::cerr << "ingero explain: " << path << ": " << damage.error().message << "\n";
      return kExitFailure;
    }
    if (!damage->empty()) fo.subtitle += sep + *damage;
  } else {
    fo.subtitle = cut_short_words((*reader)->db(), path);
  }
  fo.nodes = *nodes;
  if (have.size() == 1) fo.only_node = have[0];
  fo.window = *w;
  fo.per_process = o.per_process;
  fo.json = o.json;
  fo.all_chains = o.all_chains;
  fo.group_by = grouping(o.group_by);
  fo.error = [&] { return source.error(); };
  TerminalText text(std::cout);  // node and process names may hold escape sequences
  return explain_nodes(source, fo, o.json ? static_cast<std::ostream&>(std::cout) : text);
}

}  // namespace

void add_explain_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "explain",
      "Explain why GPU calls were slow: latency statistics, causal chains (CPU contention,\n"
      "I/O and memory pressure, launch collapse, repeated syncs, graph lifecycle, noisy\n"
      "neighbours, OOM) with their evidence, root cause and fixes. Works on our traces and the\n"
      "original implementation's, and on a fleet in ClickHouse (--source): several nodes get\n"
      "their clocks aligned and a fleet report (cross-node collective stragglers, mismatched\n"
      "collectives, outlier nodes) before their own reports. --since counts back from the\n"
      "last event.");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd->add_option("--source", o->source,
                  "Read a fleet from ClickHouse instead of a file: clickhouse://HOST:8123/DB "
                  "(clickhouses:// for TLS; password in INGERO_CLICKHOUSE_PASSWORD)");
  cmd->add_option("--node", o->nodes, "Only this node (repeatable; default: every node)");
  add_window_flags(*cmd, o->w, "Only the last 30s / 5m / 1h of the trace");
  cmd->add_option("--pid,-p", o->pid, "Only this process's calls")
      ->check(CLI::Range(1u, 4194304u));  // PID_MAX_LIMIT: 0 read as no --pid at all
  cmd->add_flag("--per-process", o->per_process, "Add the per-process breakdown");
  cmd->add_option("--group-by", o->group_by,
                  "Add the TENANTS section: GPU API time, preempted time and who preempted whom "
                  "across tenants, by pod (a pod's containers together) or by container. Tenants "
                  "are named from the trace's cgroup_metadata (pod, namespace, container); the "
                  "JSON always has them, by pod")
      ->check(CLI::IsMember({"pod", "container"}));
  cmd->add_flag("--all-chains", o->all_chains,
                "Print every causal chain in full. By default the tails with no host-side cause "
                "(LOW tail_latency chains) are folded into one line under the others; the JSON "
                "has every chain");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->callback([&ctx, o] {
    if (!o->source.empty() && !o->db.empty()) {
      std::cerr << "ingero explain: give either --db or --source\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    if (auto st = engine::check_window_spec(o->w); !st) {
      std::cerr << "ingero explain: " << st.error().message << "\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    hal::keep_freed_memory();  // one analysis, then the process exits
    ctx.exit_code = o->source.empty() ? explain_file(*o) : explain_clickhouse(*o);
  });
}

}  // namespace ingero::app
