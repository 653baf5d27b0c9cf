// `ingero compact TRACE [--full-rows D]`: tiered retention after the fact. A trace of this
// schema keeps every call of its last D before its end as a row and the older ones only in
// their folded form (the calls kept, and runs: store/tiers.h); a session that never finished
// (SIGKILL) is repaired first (store/compact.h); the file is rewritten to its size. A trace of
// an older schema (calls as rows of `events`) is first converted to this one, as `ingero merge`
// re-encodes a file. Each step is a transaction: an interrupted compact leaves a consistent
// file.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/merge_traces.h"
#include "app/read_error.h"
#include "app/trace_flags.h"
#include "engine/chain.h"
#include "engine/window_spec.h"
#include "store/call_store.h"
#include "store/compact.h"
#include "store/file_access.h"
#include "store/folded_calls.h"
#include "store/interrupt.h"
#include "store/schema.h"
#include "store/trace_reader.h"

namespace ingero::app {
namespace {

struct CompactOpts {
  std::string db, db_flag, full_rows = "10m", wait = "60s";
  bool no_archive = false;
};

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : 0;
}

// The trace on disk: the file and its write-ahead log, which a killed tracer leaves holding its
// last commits (the size said before compacting left it out).
int64_t trace_size(const std::string& path) { return file_size(path) + file_size(path + "-wal"); }

// SQLite's SQLITE_FULL, as its message says it.
bool disk_full(const std::string& message) {
  return message.find("disk is full") != std::string::npos;
}

// SQLite's SQLITE_BUSY: another process kept its lock on the file past the wait.
bool locked(const std::string& message) {
  return message.find("database is locked") != std::string::npos;
}

// What is done with the file before compacting it.
enum class Before {
  kNothing,  // this schema
  kConvert,  // an older schema, converted first
  kLeave,    // an older schema whose launches are already folded: left as it is (not an error)
  kRefused,  // unreadable, or the original implementation's (said on stderr)
};

// `host_rows`: a file of schema 10's host events, which compact_trace puts into blocks (its
// migration) and the command says so.
Before before_compacting(const std::string& db, int64_t* host_rows) {
  auto r = store::TraceReader::open(db);
  if (!r) {
    std::cerr << "ingero compact: " << r.error().message << "\n";
    return Before::kRefused;
  }
  if ((*r)->is_legacy()) {
    std::cerr << "ingero compact: " << db
              << ": a trace from the original Go implementation; it is read-only here "
                 "(`ingero merge` writes a copy of this schema)\n";
    return Before::kRefused;
  }
  if (store::has_call_store((*r)->db())) {
    if ((*r)->db().is_table("host_rows")) {
      auto n = (*r)->db().query_int("SELECT count(*) FROM main.host_rows");
      *host_rows = n ? n->value_or(0) : 0;
    }
    return Before::kNothing;
  }
  // An older file already folded has no rows for its folded launches to re-encode: it stays
  // in its own schema, which every command reads.
  auto runs = store::older_folded_runs((*r)->db());
  if (!runs) {
    std::cerr << "ingero compact: " << file_error(db, runs.error().message) << "\n";
    return Before::kRefused;
  }
  if (*runs > 0) {
    std::cout << "ingero compact: " << db << ": schema " << (*r)->info().schema_version
              << ", whose launches an earlier ingero already folded (" << *runs
              << " runs): left as it is (every ingero command reads it; traces written "
                 "from now on are schema "
              << store::kSchemaVersion << ")\n";
    return Before::kLeave;
  }
  return Before::kConvert;
}

// Converts `db` to this schema in place; the converted file replaced the one locked, so the
// lock follows it. False (said on stderr) when either fails.
bool convert_in_place(const std::string& db, store::TraceLock& lock) {
  if (auto s = convert_trace(db); !s) {
    const std::string& m = s.error().message;
    std::cerr << "ingero compact: " << file_error(db, m)
              << (disk_full(m) ? ": converting writes a copy beside the file and needs free space "
                                 "about its size; the file is as it was: run it again once there "
                                 "is room"
                               : "")
              << "\n";
    return false;
  }
  auto relock = store::TraceLock::acquire(db);
  if (!relock) {
    std::cerr << "ingero compact: " << relock.error().message << "\n";
    return false;
  }
  lock = std::move(*relock);
  return true;
}

void print_compacted(const std::string& db, bool converted, int64_t host_rows,
                     const store::Compacted& r, int64_t size0, int64_t size1) {
  std::cout << "ingero compact: "
            << (converted ? "converted to schema " + std::to_string(store::kSchemaVersion) + "; "
                          : "");
  if (host_rows >= 0)
    std::cout << "converted to schema " << store::kSchemaVersion << " (its " << host_rows
              << " host events into blocks); ";
  if (r.repaired.blocks_folded || r.repaired.seconds_rebuilt)
    std::cout << "repaired an unfinished session (" << r.repaired.blocks_folded
              << " blocks folded, " << r.repaired.calls_summarised << " calls summarised in "
              << r.repaired.seconds_rebuilt << " per-second rows); ";
  std::cout << r.folded_calls << " of " << r.calls << " calls now keep only their folded form ("
            << r.blocks << " blocks); " << db << ": " << engine::format_bytes(uint64_t(size0))
            << " -> " << engine::format_bytes(uint64_t(size1)) << "\n";
}

// The command: kExitOk, or kExitFailure once the reason is on stderr.
int run_compact(const CompactOpts& o) {
  if (o.no_archive)
    std::cerr << "ingero compact: --no-archive has no effect: calls are kept in compressed "
                 "blocks (`ingero export --format sqlite` writes plain rows)\n";
  // Not while `ingero trace` writes the file: compacting took the tracer's writes away from
  // its rings, which filled (24,547 calls lost). Held until every connection is closed.
  auto lock = store::TraceLock::acquire(o.db);
  if (!lock) {
    std::cerr << "ingero compact: " << lock.error().message
              << (lock.error().sys_errno == EWOULDBLOCK
                      ? "; compact it once that has stopped (while tracing, --full-rows and the "
                        "archive keep the file compact)"
                      : "")
              << "\n";
    return kExitFailure;
  }
  // What an interrupted write left in FILE-journal, rolled back first: every read-only
  // connection, before_compacting's among them, refuses the file until then.
  if (auto st = store::roll_back_interrupted_write(o.db); !st) {
    std::cerr << "ingero compact: " << st.error().message << "\n";
    return kExitFailure;
  }
  // The space a killed tracer set aside beside the file: no tracer writes it while compact
  // holds the lock. Only a file ingero would have written goes (store::check_owned_file: not a
  // link, not another user's).
  std::string reserve = o.db + "-reserve";
  if (store::check_owned_file(reserve)) (void)::unlink(reserve.c_str());
  int64_t size0 = trace_size(o.db);
  int64_t host_rows = -1;
  Before before = before_compacting(o.db, &host_rows);
  if (before == Before::kRefused) return kExitFailure;
  if (before == Before::kLeave) return kExitOk;
  bool converted = before == Before::kConvert;
  if (converted && !convert_in_place(o.db, *lock)) return kExitFailure;
  // A reader of the file (a report, an MCP tool call) made compact fail at once with "database
  // is locked": its writes need every reader of a file at rest to let go.
  store::CompactWait wait{
      .limit = std::chrono::milliseconds(int64_t(engine::parse_duration_s(o.wait) * 1e3)),
      .notice = [&o] {
        std::cerr << "ingero compact: " << o.db << " is open in another process; waiting up to "
                  << o.wait << " for it to let go\n";
      }};
  auto r = store::compact_trace(o.db, int64_t(engine::parse_duration_s(o.full_rows) * 1e9),
                                builtin_views(), wait);
  if (!r && store::InterruptOnSignal::signal()) {
    int sig = store::InterruptOnSignal::signal();
    std::cerr << "ingero compact: interrupted (" << strsignal(sig)
              << "): the step in progress was rolled back; the steps it finished are kept and "
              << o.db << " is whole\n";
    return 128 + sig;
  }
  if (!r) {
    // A full disk was said as SQLite's bare "database or disk is full", without the file.
    const std::string& m = r.error().message;
    std::cerr << "ingero compact: " << file_error(o.db, m)
              << (disk_full(m)
                      ? ": compact needs free space about the file's size, as it rewrites it; the "
                        "steps it finished are kept and the file is whole: run it again once "
                        "there is room"
                      : "")
              << (locked(m) ? ": compact waited " + o.wait +
                                  " (--wait); the steps it finished are kept and the file is whole"
                            : "")
              << "\n";
    return kExitFailure;
  }
  print_compacted(o.db, converted, host_rows, *r, size0, trace_size(o.db));
  return kExitOk;
}

}  // namespace

void add_compact_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "compact",
      "Keep every call of the last --full-rows before a trace's end as a row, and the older\n"
      "calls only in their folded form: launches in runs, slow, failed and off-CPU calls,\n"
      "syncs, copies, allocations, collectives and every host event, per-second summaries\n"
      "of every call (tiered retention, as `ingero trace` does while it records); repair a\n"
      "trace whose tracer was killed; give the space freed back (a trace recorded with\n"
      "--keep-all whose calls all lie within --full-rows grows instead, by their folded forms).\n"
      "A trace of an older schema is converted first. Modifies TRACE in place.");
  auto o = std::make_shared<CompactOpts>();
  // Positional, or --db as every other command that reads a trace takes it; one of them.
  cmd->add_option("trace", o->db, "Trace file to compact (or --db TRACE)");
  cmd->add_option("-d,--db", o->db_flag, "Trace file to compact");
  cmd->add_option("--full-rows", o->full_rows,
                  "Keep every call's row for this long before the trace's end (default 10m)")
      ->check(trace_flags::duration_check("10m, 1h"));  // a bare number is refused
  cmd->add_option("--wait", o->wait,
                  "How long to wait for other processes reading TRACE to let go of it "
                  "(default 60s)")
      ->check(trace_flags::duration_check("30s, 5m"));
  cmd->add_flag("--no-archive", o->no_archive,
                "Has no effect: calls are kept in compressed blocks; `ingero export --format "
                "sqlite` writes a copy of plain rows for the sqlite3 shell")
      ->group("");
  // A success leaves the exit code as it is.
  cmd->callback([&ctx, o] {
    if (o->db.empty() == o->db_flag.empty()) {  // neither, or both: which one?
      std::cerr << "ingero compact: give the trace to compact once: ingero compact TRACE (or "
                   "--db TRACE)\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    if (o->db.empty()) o->db = o->db_flag;
    if (int code = run_compact(*o); code != kExitOk) ctx.exit_code = code;
  });
}

}  // namespace ingero::app
