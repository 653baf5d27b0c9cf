// `ingero export`: --format perfetto writes Chrome trace-event JSON (app/export_perfetto.cc);
// --format pprof a profile for continuous profilers (app/export_pprof.cc); --format sqlite a
// copy whose calls are plain rows.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/export_options.h"
#include "app/export_perfetto.h"
#include "app/output_file.h"
#include "app/read_error.h"
#include "app/temp_files.h"
#include "app/window_flags.h"
#include "engine/analysis.h"
#include "engine/fleet.h"
#include "engine/node_selection.h"
#include "engine/window_spec.h"
#include "fleet/clickhouse_source.h"
#include "store/plain_copy.h"
#include "store/sql_trace_source.h"

namespace ingero::app {
namespace {

// The window asked for, resolved against `source`, its end pinned (a trace still being written
// must not change between the reads).
ingero::Result<engine::Window> export_window(engine::TraceSource& source, const ExportOpts& o) {
  engine::WindowSpec spec = o.w;
  if (o.pid) spec.pid = o.pid;
  auto w = engine::resolve_window(source, spec);
  if (!w) return w;
  if (o.pid)
    if (auto st = engine::check_pid(source.processes(), o.pid); !st) return st.error();
  if (w->to_ns == std::numeric_limits<int64_t>::max()) w->to_ns = source.time_span().second;
  return w;
}

// The fleet in ClickHouse, on one timeline: each node's clock offset removed (engine/fleet.h).
std::string export_fleet(const ExportOpts& o, Emitter& em) {
  auto ep = fleet::parse_endpoint(o.source);
  if (!ep) return ep.error().message;
  fleet::ClickHouseTraceSource source(std::make_unique<fleet::ClickHouseClient>(*ep));
  source.name_errors_with(builtin_error_codes());
  std::vector<std::string> have = source.nodes();
  if (have.size() > 1 && source.error().empty())
    source.set_clock_offsets(engine::clock_shift(engine::estimate_clock_offsets(
        engine::gather_fleet_collectives(source, engine::Window{}, have), have)));
  if (!source.error().empty()) return source.error();
  auto nodes = engine::pick_nodes(have, o.nodes);
  if (!nodes) return nodes.error().message;
  auto w = export_window(source, o);
  if (!w) return w.error().message;
  write_perfetto(
      source, *w, *nodes, have.size() > 1,
      [&](const std::optional<std::string>& n) { source.set_scope(n); }, em);
  return source.error();
}

// --format sqlite: a copy whose calls are plain rows (store/plain_copy.h), written beside the
// output and renamed over it once whole.
int export_sqlite(const ExportOpts& o) {
  if (!o.source.empty() || o.out.empty() || o.out == "-") {
    std::cerr << "ingero export: --format sqlite writes a file: give --db and -o FILE\n";
    return kExitUsage;
  }
  // A copy of the whole file: a window, a process or a node would be dropped without a word.
  if (!o.w.since.empty() || !o.w.from.empty() || !o.w.to.empty() || o.pid || !o.nodes.empty()) {
    std::cerr << "ingero export: --format sqlite copies the whole file: --since, --from, --to, "
                 "--pid and --node do not apply (`ingero query` selects rows)\n";
    return kExitUsage;
  }
  std::string path = o.db.empty() ? default_db_path() : o.db;
  std::error_code ec;
  // The copy is renamed into place: over a device or a FIFO it would replace it (/dev/full
  // became an 88 MB file, exit 0).
  if (auto t = std::filesystem::status(o.out, ec);
      !ec && std::filesystem::exists(t) && !std::filesystem::is_regular_file(t)) {
    std::cerr << "ingero export: " << o.out
              << ": is not a regular file (a device or a FIFO): --format sqlite writes a "
                 "database file of its own, renamed into place (give a file name)\n";
    return kExitUsage;
  }
  ec.clear();
  // The copy is made in a folder of its own beside the output (mkdtemp: a name nobody could
  // plant a file or a link at beforehand, mode 0700), as 0600, and renamed out of it: SQLite
  // opens VACUUM INTO's file by name, so a fixed name in a shared folder was a file another user
  // could plant (written through, and left world-readable).
  std::filesystem::path out(o.out);
  std::string folder =
      ((out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path()) /
       ("." + out.filename().string() + ".export-XXXXXX"))
          .string();
  std::optional<FatalSignalsHeld> held(std::in_place);  // until the folder is listed
  if (!::mkdtemp(folder.data())) {
    std::cerr << "ingero export: "
              << ingero::Error::sys("making a folder for the copy beside " + o.out, errno).message
              << "\n";
    return kExitFailure;
  }
  std::string tmp = folder + "/copy.db";
  // Ctrl-C while it copies: the copy, its journal and the folder go (app/temp_files.h).
  remove_on_fatal_signal(tmp);
  remove_on_fatal_signal(tmp + "-journal");
  remove_on_fatal_signal(folder);
  held.reset();
  struct Unlisted {
    std::string tmp, folder;
    ~Unlisted() {
      keep_on_fatal_signal(tmp);
      keep_on_fatal_signal(tmp + "-journal");
      keep_on_fatal_signal(folder);
      std::error_code ec;
      std::filesystem::remove_all(folder, ec);  // what a failure left in it; empty otherwise
    }
  } unlisted{tmp, folder};
  auto r = store::write_plain_copy(path, tmp, builtin_views());
  if (!r) {
    // The copy reads the trace through the temporary file's connection, whose name SQLite's
    // and the archive's errors carry (and never the trace's): said as the output's.
    std::string m = r.error().message;
    for (const std::string& name :
         {std::filesystem::absolute(tmp, ec).lexically_normal().string(), tmp}) {
      for (size_t at; (at = m.find(name + ": ")) != std::string::npos;)
        m.erase(at, name.size() + 2);  // "TMP: TMP: call block 5: ...": said once, for FILE
      for (size_t at; (at = m.find(name)) != std::string::npos;) m.replace(at, name.size(), o.out);
    }
    std::cerr << "ingero export: copying " << path << " into " << o.out << ": " << m << "\n";
    return kExitFailure;
  }
  // An old -wal beside the name would be read as the copy's.
  if (auto st = clear_sqlite_sides(o.out); !st) {
    std::cerr << "ingero export: " << st.error().message << "\n";
    return kExitFailure;
  }
  if (::chmod(tmp.c_str(), 0600) != 0 || ::rename(tmp.c_str(), o.out.c_str()) != 0) {
    std::cerr << "ingero export: "
              << ingero::Error::sys("renaming the copy to " + o.out, errno).message << "\n";
    return kExitFailure;
  }
  std::cerr << "ingero export: " << r->calls << " calls, " << r->runs
            << " runs of folded calls and " << r->host_events << " host events as plain rows in "
            << o.out << "\n";
  return kExitOk;
}

int run_export(const ExportOpts& o) {
  if (auto st = engine::check_window_spec(o.w); !st) {
    std::cerr << "ingero export: " << st.error().message << "\n";
    return kExitUsage;
  }
  // The output: not a folder, not the trace read, not a file that exists without --force.
  std::vector<std::string> inputs;
  if (o.source.empty()) inputs.push_back(o.db.empty() ? default_db_path() : o.db);
  if (auto why = OutputFile::refusal(o.out, o.force, inputs)) {
    std::cerr << "ingero export: " << *why << "\n";
    return kExitUsage;
  }
  if (o.format == "sqlite") return export_sqlite(o);
  if (o.format == "pprof") return run_pprof_export(o);
  if (!o.source.empty() && !o.db.empty()) {
    std::cerr << "ingero export: give either --db or --source\n";
    return kExitUsage;
  }
  if (!o.source.empty())
    if (auto ep = fleet::parse_endpoint(o.source); !ep) {
      std::cerr << "ingero export: " << ep.error().message << "\n";
      return kExitUsage;
    }
  std::string path = o.db.empty() ? default_db_path() : o.db;
  std::unique_ptr<store::TraceReader> reader;
  if (o.source.empty()) {
    auto r = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
    if (!r) {
      std::cerr << "ingero export: " << r.error().message << "\n";
      return kExitFailure;
    }
    reader = std::move(*r);
  }
  auto out = OutputFile::open(
      o.out, o.force,
      o.source.empty() ? std::vector<std::string>{path} : std::vector<std::string>{});
  if (!out) {
    std::cerr << "ingero export: " << out.error().message << "\n";
    return kExitFailure;
  }
  Emitter em(**out);
  std::string error;
  if (!o.source.empty()) {
    error = export_fleet(o, em);
  } else {
    store::SqlTraceSource source(*reader);
    std::vector<std::string> have = source.nodes();
    auto nodes = engine::pick_nodes(have.empty() ? std::vector<std::string>{""} : have, o.nodes);
    auto w = export_window(source, o);
    if (!nodes || !w) {
      std::cerr << "ingero export: " << (!nodes ? nodes.error().message : w.error().message)
                << "\n";
      return kExitUsage;
    }
    write_perfetto(source, *w, *nodes, have.size() > 1, nullptr, em);
    if (!source.error().empty()) error = reading_error(path, source.error());
  }
  // A read error leaves no output file: the temporary file goes with `out`.
  if (!error.empty()) {
    std::cerr << "ingero export: " << error << "\n";
    return kExitFailure;
  }
  if (auto st = em.finish(); !st) {
    std::cerr << "ingero export: " << st.error().message << "\n";
    return kExitFailure;
  }
  if (!o.out.empty() && o.out != "-")
    std::cerr << "ingero export: " << em.count() << " trace events written to " << o.out << "\n";
  return kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "export",
      "Export a trace for other tools: --format perfetto writes Chrome trace-event JSON that\n"
      "ui.perfetto.dev opens (one process track per node and pid, chains as markers); --format\n"
      "pprof a gzip-compressed pprof profile (sample types cpu, gpu_wait, launches, gpu_api)\n"
      "for go tool pprof, Pyroscope, Parca; --format sqlite a copy whose calls are plain rows,\n"
      "for tools that open the file themselves (the sqlite3 shell): ingero keeps calls in\n"
      "compressed blocks it reads through its own tables. Examples:\n"
      "  ingero export --db run.db -o run.json\n"
      "  ingero export --format pprof --db run.db -o run.pb.gz --since 10m\n"
      "  ingero export --format sqlite --db run.db -o plain.db");
  auto o = std::make_shared<ExportOpts>();
  cmd->add_option("--format", o->format, "Output format: perfetto, pprof or sqlite")
      ->check(CLI::IsMember({"perfetto", "pprof", "sqlite"}))
      ->capture_default_str();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd->add_option("--source", o->source,
                  "Export a fleet from ClickHouse instead of a file: clickhouse://HOST:8123/DB "
                  "(one timeline: node clock offsets removed)");
  cmd->add_option("-o,--out,--output", o->out,
                  "Output file (default: stdout). Written to a temporary file in the same folder "
                  "and renamed over it when complete; never the input trace")
      ->check(path_given());
  cmd->add_flag("--force", o->force, "Replace the output file if it exists");
  add_window_flags(*cmd, o->w, "Only the last 30s / 5m / 1h of the trace");
  cmd->add_option("--pid,-p", o->pid, "Only this process's calls and samples")
      ->check(CLI::Range(1u, 4194304u));  // PID_MAX_LIMIT: 0 read as no --pid at all
  cmd->add_option("--node", o->nodes, "Only this node (repeatable; default: every node)");
  cmd->callback([&ctx, o] { ctx.exit_code = run_export(*o); });
}

}  // namespace ingero::app
