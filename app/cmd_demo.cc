#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/demo_scenarios.h"
#include "app/explain_report.h"
#include "app/output_file.h"
#include "app/read_error.h"
#include "app/temp_files.h"
#include "app/window_flags.h"
#include "engine/json_text.h"
#include "hal/memory.h"
#include "store/file_access.h"
#include "store/sql_trace_source.h"

namespace ingero::app {

void add_demo_command(CLI::App& app, Context& ctx) {
  std::string help =
      "Explain a synthetic incident end to end, with no root and no GPU: the scenario is\n"
      "written through the same trace store and explained by the same engine as a real trace.\n"
      "Scenarios:";
  for (const auto& s : demo_scenarios()) help += "\n  " + s.name + ": " + s.description;
  auto* cmd = app.add_subcommand("demo", help);
  struct Opts {
    std::string scenario = "incident", db;
    bool no_gpu = false, json = false, per_process = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("scenario", o->scenario, "Scenario name")->capture_default_str();
  cmd->add_flag("--no-gpu", o->no_gpu, "Accepted for compatibility: the demo never needs a GPU");
  cmd->add_flag("--json", o->json, "Print the report as JSON");
  cmd->add_flag("--per-process", o->per_process, "Add the per-process breakdown");
  cmd->add_option("--db", o->db,
                  "Keep the synthetic trace at this path (default: a temporary file)")
      ->check(path_given());
  cmd->callback([&ctx, o] {
    // An unknown scenario is a usage error, said before any file is made.
    bool known = false;
    std::string names;
    for (const auto& s : demo_scenarios()) {
      known = known || s.name == o->scenario;
      names += (names.empty() ? "" : ", ") + s.name;
    }
    if (!known) {
      std::cerr << "ingero demo: unknown scenario '" << o->scenario << "' (known: " << names
                << ")\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    std::string path = o->db, temp_dir;
    std::optional<FatalSignalsHeld> held;
    if (path.empty()) {
      // A private folder (0700) of its own in /tmp: a fixed or guessable file name in a folder
      // everyone writes to could be a link planted by another user.
      // In $TMPDIR where it is set, as other programs' temporary files are.
      const char* env = std::getenv("TMPDIR");
      const std::string base = env && *env ? env : "/tmp";
      std::string tmpl = base + "/ingero-demo-XXXXXX";
      held.emplace();  // until the folder is listed, below
      if (!mkdtemp(tmpl.data())) {
        std::cerr << "ingero demo: cannot create a temporary folder in " << base << ": "
                  << std::strerror(errno) << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
      temp_dir = tmpl;
      path = temp_dir + "/demo.db";
    } else if (auto there = name_taken(path); !there) {
      // A link loop, a name past 255 bytes: said, not thrown (it aborted, exit 134).
      std::cerr << "ingero demo: " << path << ": " << there.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    } else if (*there) {
      std::cerr << "ingero demo: " << path << " exists; give a new path\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    // Ctrl-C while the demo is written (or, in its own folder, while it is explained) left the
    // folder, or the half-written file of --db, with SQLite's files beside it: 27 SIGINTs of
    // 30 did. Listed, they go with the signal.
    struct Cleanup {
      std::string dir;
      std::vector<std::string> listed;
      void list(const std::string& p) {
        remove_on_fatal_signal(p);
        listed.push_back(p);
      }
      void keep() {
        for (const auto& p : listed) keep_on_fatal_signal(p);
        listed.clear();
      }
      ~Cleanup() {
        std::error_code ec;
        if (!dir.empty()) std::filesystem::remove_all(dir, ec);
        keep();
      }
    } cleanup{temp_dir, {}};
    for (const char* suffix : {"", "-journal", "-wal", "-shm", "-reserve"})
      cleanup.list(path + suffix);
    if (!temp_dir.empty()) cleanup.list(temp_dir);
    held.reset();
    {
      auto w = store::TraceWriter::open(path, builtin_views());
      if (!w) {
        std::cerr << "ingero demo: " << w.error().message << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
      // Written whole or not at all: the file is new (an existing one is refused above), and a
      // half-written demo (a full disk) is removed with SQLite's files beside it.
      ingero::Status st = write_demo(o->scenario, **w);
      // Ended as a tracer ends its session: without a stop time and reason it read as a tracer
      // killed mid-trace (status: "ended without stopping"; compact "repaired" it).
      store::SessionEnd end;
      end.stopped_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      end.exit_reason = "demo";
      if (st) st = (*w)->finish(end);
      if (!st) {
        w->reset();
        store::remove_database_files(path);
        std::cerr << "ingero demo: " << file_error(path, st.error().message)
                  << (o->db.empty() ? "" : " (the new file was removed)") << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
    }
    // The file of --db is the user's now, whole.
    if (temp_dir.empty()) cleanup.keep();
    auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
    if (!reader) {
      std::cerr << "ingero demo: " << reader.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    store::SqlTraceSource source(**reader);
    hal::keep_freed_memory();  // the trace is written: one analysis, then the process exits
    engine::Analysis a = engine::analyze(source, engine::Window{});
    if (!source.error().empty()) {
      std::cerr << "ingero demo: " << reading_error(path, source.error()) << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    std::string desc;
    for (const auto& s : demo_scenarios())
      if (s.name == o->scenario) desc = s.description;
    ReportOptions ro{"demo: " + o->scenario,
                     "SYNTHETIC DEMO DATA (" + desc + "). Generated, not measured on this machine.",
                     o->per_process, std::nullopt};
    if (o->json) {
      auto j = report_json(a, ro);
      j["synthetic"] = true;
      j["scenario"] = o->scenario;
      std::cout << engine::json_text(j, 2) << "\n";
    } else {
      print_report(std::cout, a, ro);
    }
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
