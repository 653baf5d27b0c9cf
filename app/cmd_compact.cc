// `ingero compact TRACE [--full-rows D]`: tiered retention after the fact, for a trace
// recorded with --keep-all (or by an older version): launches older than D before the trace's
// last event are folded into runs (store/tiers.h), then the file is rewritten to its new
// size. Folding goes in transactions, so an interrupted compact leaves a consistent file.
#include <sys/stat.h>

#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "engine/chain.h"
#include "engine/window_spec.h"
#include "store/file_access.h"
#include "store/tiers.h"

namespace ingero::app {
namespace {

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : 0;
}

}  // namespace

void add_compact_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "compact",
      "Fold the launches of a trace older than --full-rows before its end into runs, keeping\n"
      "per-second summaries of every call (tiered retention, as `ingero trace` does while it\n"
      "records), and shrink the file. Slow, failed and off-CPU calls, syncs, copies,\n"
      "allocations, collectives and host events keep their rows. The calls left are then\n"
      "archived: stored in compressed blocks that ingero reads back as rows. Modifies TRACE in\n"
      "place.");
  struct Opts {
    std::string db, full_rows = "10m";
    bool no_archive = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("trace", o->db, "Trace file to compact")->required();
  cmd->add_option("--full-rows", o->full_rows,
                  "Keep every call's row for this long before the trace's end (default 10m)")
      ->check(CLI::Validator(
          [](std::string& s) {
            return engine::parse_duration_s(s) > 0 ? "" : "expected a duration: 10m, 1h";
          },
          "DURATION"));
  cmd->add_flag("--no-archive", o->no_archive,
                "Keep the calls as rows of `events` instead of compressed blocks (what tools\n"
                "that open the file themselves, such as the sqlite3 shell, read)");
  cmd->callback([&ctx, o] {
    // Not while `ingero trace` writes the file: compacting took the tracer's writes away from
    // its rings, which filled (24,547 calls lost). Held until every connection is closed.
    auto lock = store::TraceLock::acquire(o->db);
    if (!lock) {
      std::cerr << "ingero compact: " << lock.error().message
                << "; compact it once that has stopped (while tracing, --full-rows and the "
                   "archive keep the file compact)\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    int64_t size0 = file_size(o->db);
    auto r = store::compact_trace(o->db, int64_t(engine::parse_duration_s(o->full_rows) * 1e9),
                                  builtin_views(), !o->no_archive);
    if (!r) {
      std::cerr << "ingero compact: " << r.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    int64_t size1 = file_size(o->db);
    std::cout << "ingero compact: folded " << r->folded << " of " << r->calls_before
              << " calls into " << r->runs << " runs";
    if (!o->no_archive)
      std::cout << ", archived " << r->archived << " call rows in " << r->blocks << " blocks and "
                << r->archived_runs << " runs in " << r->run_blocks << " blocks";
    std::cout << "; " << o->db << ": " << engine::format_bytes(uint64_t(size0)) << " -> "
              << engine::format_bytes(uint64_t(size1)) << "\n";
  });
}

}  // namespace ingero::app
