// `ingero ship`: ship a trace file's rows that ClickHouse does not have yet (after an agent
// exited with rows left, or for a file traced without --clickhouse), and the DDL.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "app/commands.h"
#include "app/trace_signals.h"
#include "app/tracer.h"
#include "app/window_flags.h"
#include "engine/window_spec.h"
#include "fleet/ch_schema.h"
#include "fleet/ship_state.h"
#include "fleet/shipper.h"
#include "fleet/spool.h"
#include "store/file_access.h"
#include "store/sqlite_db.h"

namespace ingero::app {
namespace {

struct Opts {
  std::string db, url, timeout = "5m", cluster, shard_db = "ingero";
  bool ddl = false, create = false;
};

int print_or_create_ddl(const Opts& o) {
  std::string database = "ingero";
  std::optional<fleet::Endpoint> ep;
  if (!o.url.empty()) {
    auto e = fleet::parse_endpoint(o.url);
    if (!e) {
      std::cerr << "ingero ship: " << e.error().message << "\n";
      return kExitUsage;
    }
    ep = *e;
    database = e->database;
  }
  if (!o.cluster.empty() &&
      (!fleet::is_identifier(o.cluster) || !fleet::is_identifier(o.shard_db))) {
    std::cerr << "ingero ship: --cluster and --shard-db must be plain names\n";
    return kExitUsage;
  }
  auto ddl = o.cluster.empty() ? fleet::local_ddl(database)
                               : fleet::distributed_ddl(database, o.cluster, o.shard_db);
  if (!o.create) {
    for (const auto& s : ddl) std::cout << s << ";\n\n";
    return kExitOk;
  }
  if (!ep) {
    std::cerr << "ingero ship: --create needs --clickhouse URL\n";
    return kExitUsage;
  }
  fleet::ClickHouseClient client(*ep);
  if (auto r = fleet::drop_outdated_views(client); !r) {
    std::cerr << "ingero ship: " << r.error().message << "\n";
    return kExitFailure;
  }
  for (const auto& s : ddl)
    if (auto r = client.execute(s); !r) {
      std::cerr << "ingero ship: " << r.error().message << "\n";
      return kExitFailure;
    }
  std::cerr << "ingero ship: " << ddl.size() << " statements run on " << ep->display() << "\n";
  return kExitOk;
}

int ship(const Opts& o) {
  if (o.db.empty() || o.url.empty()) {
    std::cerr << "ingero ship: give --db FILE and --clickhouse URL (or --ddl)\n";
    return kExitUsage;
  }
  auto ep = fleet::parse_endpoint(o.url);
  if (!ep) {
    std::cerr << "ingero ship: " << ep.error().message << "\n";
    return kExitUsage;
  }
  // At most a century (Shipper::drain): longer overflowed, and the drain gave up at once.
  double secs = std::min(engine::parse_duration_s(o.timeout), 100 * 365 * 86400.0);
  if (secs <= 0) {
    std::cerr << "ingero ship: bad --timeout '" << o.timeout << "' (use 30s, 5m)\n";
    return kExitUsage;
  }
  // A file that is no trace of ours is said at once: it was retried until --timeout (5
  // minutes), said to hold "0 rows left" that "stay in" it.
  if (auto spool = fleet::Spool::open(o.db); !spool) {
    std::cerr << "ingero ship: " << spool.error().message << "\n";
    return kExitFailure;
  }
  // A damaged page (an index, `sources`, `ops`) hid rows from the spool without an error: 7,142
  // of 13,067 events were shipped, said to be "every row of the file", exit 0, and fleet.md
  // has the file deleted then. The whole file is checked first (~5 s a GB).
  {
    auto db = store::Db::open(o.db, store::Db::Mode::kReadOnly);
    if (!db) {
      std::cerr << "ingero ship: " << db.error().message << "\n";
      return kExitFailure;
    }
    if (auto st = store::check_intact(**db); !st) {
      std::cerr << "ingero ship: " << st.error().message << ": nothing shipped\n";
      return kExitFailure;
    }
  }
  fleet::ShipperOptions so;
  so.log = [](const std::string& m) { std::cerr << "ingero ship: " << m << "\n"; };
  auto shipper = fleet::Shipper::create(o.db, *ep, so);
  if (!shipper) {
    std::cerr << "ingero ship: " << shipper.error().message << "\n";
    return kExitFailure;
  }
  // SIGINT, SIGTERM or SIGHUP while shipping ends the drain within 100 ms, and what was
  // shipped and what is left is said, as for every other end: it killed `ship` silently, exit
  // 143, and whether a rerun was needed went unsaid.
  trace_detail::install_signal_handlers();
  std::atomic<bool> drained{false};
  std::thread stop_on_signal([&] {
    while (!drained.load()) {
      if (trace_detail::g_stop_signal) {
        (*shipper)->set_deadline(std::chrono::steady_clock::now());
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto r = (*shipper)->drain(std::chrono::milliseconds(int64_t(secs * 1000)));
  drained = true;
  stop_on_signal.join();
  auto t = (*shipper)->totals();
  std::cout << "shipped " << t.rows << " rows of " << o.db << " to " << ep->display() << " in "
            << t.batches << " inserts (" << t.bytes_sent / 1024 << " KiB compressed from "
            << t.bytes_raw / 1024 << " KiB)";
  // Answered with success, yet not found when read back, or read back without an answer
  // (fleet/ship_confirm.h): not counted. A read-back that timed out was said to find nothing.
  if (const uint64_t missing = t.unconfirmed - t.unread)
    std::cout << "; " << missing
              << " inserts answered with success were not in ClickHouse when read back and are "
                 "not counted";
  if (t.unread)
    std::cout << "; " << t.unread
              << " inserts answered with success could not be read back (no answer) and are not "
                 "counted: a rerun ships what ClickHouse lacks";
  if (r.caught_up) {
    std::cout << "; ClickHouse has every row of the file\n";
    return kExitOk;
  }
  std::cout << "; " << r.unshipped << " rows left\n";
  if (const int sig = trace_detail::g_stop_signal) {
    std::cerr << "ingero ship: " << trace_detail::signal_name(sig)
              << ": stopped; the rows left ship on the next run\n";
    return 128 + sig;
  }
  if (!r.logged) std::cerr << "ingero ship: " << r.last_error << "\n";
  return kExitFailure;
}

}  // namespace

void add_ship_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "ship",
      "Ship a trace file to ClickHouse: every row the database does not hold yet (resuming\n"
      "where the last agent or `ship` stopped; nothing is sent twice), then exit. Exit 1 when\n"
      "rows are left (ClickHouse down past --timeout). With --ddl, print the CREATE statements\n"
      "instead (local tables; with --cluster, Distributed tables over every shard), or run them\n"
      "with --create. Examples:\n"
      "  ingero ship --db /var/lib/ingero/run.db --clickhouse http://ch1:8123/ingero\n"
      "  ingero ship --ddl --clickhouse http://ch1:8123/fleet --cluster fleet --shard-db ingero "
      "--create");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--db,-d", o->db, "Trace file to ship")->check(path_given());
  cmd->add_option("--clickhouse", o->url,
                  "ClickHouse database: http://HOST:8123/DB (https:// for TLS; password in "
                  "INGERO_CLICKHOUSE_PASSWORD)");
  cmd->add_option("--timeout", o->timeout, "Give up after this long: 30s, 5m (default 5m)");
  cmd->add_flag("--ddl", o->ddl, "Print the DDL for the database of --clickhouse (default ingero)");
  cmd->add_option("--cluster", o->cluster,
                  "With --ddl: Distributed tables over this cluster (remote_servers) instead");
  cmd->add_option("--shard-db", o->shard_db,
                  "With --cluster: the database holding the local tables on every shard "
                  "(default ingero)");
  cmd->add_flag("--create", o->create, "With --ddl: run the statements on --clickhouse");
  cmd->callback([&ctx, o, cmd] {
    // --cluster, --shard-db and --create shape the DDL; without --ddl they did nothing, unsaid.
    for (const char* ddl_only : {"--cluster", "--shard-db", "--create"})
      if (!o->ddl && cmd->count(ddl_only)) {
        std::cerr << "ingero ship: " << ddl_only << " goes with --ddl\n";
        ctx.exit_code = kExitUsage;
        return;
      }
    ctx.exit_code = o->ddl ? print_or_create_ddl(*o) : ship(*o);
  });
}

}  // namespace ingero::app
