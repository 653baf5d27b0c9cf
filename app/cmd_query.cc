#include <filesystem>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/byte_size.h"
#include "app/commands.h"
#include "app/result_printer.h"
#include "app/terminal_text.h"
#include "app/window_flags.h"
#include "fleet/clickhouse_client.h"
#include "store/query_json.h"
#include "store/temp_file_cap.h"
#include "store/trace_reader.h"

namespace ingero::app {

namespace {

// One statement against ClickHouse, read-only (readonly=1, enforced by the server), streamed
// to stdout as it arrives: TSVWithNames, or a JSON array of row objects (from JSONEachRow).
int query_clickhouse(const std::string& url, const std::string& sql, bool json, size_t limit,
                     int timeout_s) {
  auto ep = fleet::parse_endpoint(url);
  if (!ep) {
    std::cerr << "ingero query: " << ep.error().message << "\n";
    return kExitUsage;
  }
  fleet::ClientOptions co;
  co.request_timeout_ms = (timeout_s + 5) * 1000;
  fleet::ClickHouseClient client(*ep, co);
  fleet::Settings s = fleet::read_only_settings(ep->database, json ? "JSONEachRow" : "TSVWithNames",
                                                limit + 1, timeout_s);
  size_t lines = 0, max_lines = limit + (json ? 0 : 1);  // TSVWithNames: the header line
  bool truncated = false, first = true, held = false;
  // Each line is printed once the next has come: ClickHouse appends an exception that stops
  // the statement after its rows to the body, as the last line, which is no row.
  std::string partial, last;
  if (json) std::cout << "[";
  auto emit = [&](std::string_view line) {  // one complete line, newline excluded
    if (json) {
      std::cout << (first ? "" : ",") << line;
      first = false;
    } else {
      std::cout << line << "\n";
    }
  };
  auto st = client.stream(
      sql, s,
      [&](std::string_view chunk) {
        size_t start = 0;
        while (true) {
          size_t nl = chunk.find('\n', start);
          if (nl == std::string_view::npos) break;
          if (lines == max_lines) {
            truncated = true;
            return false;
          }
          partial.append(chunk.substr(start, nl - start));
          if (held) emit(last);
          last.swap(partial);
          held = true;
          partial.clear();
          ++lines;
          start = nl + 1;
        }
        partial.append(chunk.substr(start));
        return true;
      },
      (timeout_s + 5) * 1000);
  // A failed stream's last line is ClickHouse's exception (said on stderr below), not a row.
  if (held && (st || fleet::trailing_exception(last).empty())) emit(last);
  if (st && !partial.empty() && !truncated) emit(partial);
  if (json) std::cout << "]\n";
  std::cout.flush();
  if (!st) {
    std::cerr << "ingero query: " << st.error().message << "\n";
    return kExitFailure;
  }
  if (truncated) std::cerr << "ingero query: truncated at row limit " << limit << "\n";
  return kExitOk;
}

struct QueryOpts {
  std::string db, source;
  std::vector<std::string> args;
  bool json = false;
  size_t limit = 10000;
  int timeout_s = 30;
  std::string max_temp = "1GiB";
};

// The trace and the statement, from `[PATH] SQL` and --db: false (said on stderr) when both
// name a trace, or a trace and --source are given.
bool trace_and_statement(const QueryOpts& o, std::string& path, std::string& sql) {
  path = o.db;
  if (o.args.size() == 2) {
    if (!path.empty()) {
      std::cerr << "ingero query: give the trace either as --db or as the first argument\n";
      return false;
    }
    path = o.args[0];
    sql = o.args[1];
    // `ingero query "SELECT 1" run.db`: the statement was opened as the trace ("SELECT 1: No
    // such file or directory", exit 1).
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) && std::filesystem::is_regular_file(sql, ec)) {
      std::cerr << "ingero query: " << sql
                << " is a file and the statement comes first: give the trace first (ingero "
                   "query "
                << sql << " \"SQL\")\n";
      return false;
    }
  } else {
    sql = o.args[0];
    // `ingero query run.db`: the trace without a statement was read as the statement, against
    // the default trace ("~/.ingero/ingero.db: No such file or directory", exit 1).
    std::error_code ec;
    if (path.empty() && o.source.empty() && std::filesystem::is_regular_file(sql, ec)) {
      std::cerr << "ingero query: " << sql
                << " is a file, not a statement: give the SQL after it (ingero query " << sql
                << " \"SELECT ...\")\n";
      return false;
    }
  }
  if (!o.source.empty() && !path.empty()) {
    std::cerr << "ingero query: give either a trace file or --source\n";
    return false;
  }
  return true;
}

void print_result(const store::QueryResult& res, bool json) {
  if (json) {
    // The array written row by row, as its dump() writes it: the whole result as one JSON
    // document beside its values took 3.3 GB for 300,000 calls.
    const std::vector<std::string> keys = store::json_keys(res);
    std::cout << '[';
    for (size_t i = 0; i < res.rows.size(); ++i)
      std::cout << (i ? "," : "")
                << store::row_to_json(res, i, keys)
                       .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::cout << "]\n";
    std::string renamed;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] != res.columns[i]) renamed += (renamed.empty() ? "" : ", ") + keys[i];
    if (!renamed.empty())
      std::cerr << "ingero query: note: columns named as one before them are keyed " << renamed
                << " in the JSON\n";
  } else {
    TerminalText text(std::cout);  // values may hold escape sequences (--json escapes them)
    // Its last line says a cut of rows too.
    if (size_t cut = print_table(text, res))
      std::cerr << "ingero query: " << cut << (cut == 1 ? " value" : " values") << " longer than "
                << kCellChars << " characters cut in the table (--json gives every value whole)\n";
  }
  // On stderr whatever the format: a script reading the table's rows sees no last line.
  if (res.truncated) std::cerr << "ingero query: truncated at " << res.truncated_reason << "\n";
  if (!res.note.empty()) std::cerr << "ingero query: note: " << res.note << "\n";
}

// One statement against a trace file, within --limit, --timeout and --max-temp.
int query_file(const QueryOpts& o, const std::string& path, const std::string& sql) {
  // Before the file is opened: every connection from now on counts its temporary files.
  const uint64_t max_temp = parse_size(o.max_temp);
  if (auto st = store::cap_temp_files(INT64_MAX / 2); !st) {
    std::cerr << "ingero query: " << st.error().message << "\n";
    return kExitFailure;
  }
  auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
  if (!reader) {
    std::cerr << "ingero query: " << reader.error().message << "\n";
    return kExitFailure;
  }
  // The statement's own: what opening the file made (a legacy file's folded calls) is not.
  store::cap_temp_files_beyond_held(max_temp);
  store::QueryLimits limits;
  limits.max_rows = o.limit;
  limits.timeout_ms = o.timeout_s * 1000;
  limits.max_bytes = 256u << 20;
  limits.keyed_rows = o.json;
  limits.max_value_bytes = 64 << 20;
  auto res = store::run_query(**reader, sql, limits);
  if (!res && store::temp_cap_hit()) {
    std::cerr << "ingero query: the statement needs more than " << o.max_temp
              << " of temporary files (its sorts, GROUP BY or DISTINCT over many rows); "
                 "--max-temp raises the limit, a WHERE or LIMIT narrows the statement\n";
    return kExitFailure;
  }
  if (!res) {
    std::cerr << "ingero query: " << res.error().message << "\n";
    return kExitFailure;
  }
  print_result(*res, o.json);
  return kExitOk;
}

int run_query_command(const QueryOpts& o) {
  std::string path, sql;
  if (!trace_and_statement(o, path, sql)) return kExitUsage;
  if (!o.source.empty()) return query_clickhouse(o.source, sql, o.json, o.limit, o.timeout_s);
  if (path.empty()) path = default_db_path();
  return query_file(o, path, sql);
}

}  // namespace

void add_query_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "query",
      "Run one read-only SQL statement against a trace file (ours or the original Go\n"
      "implementation's). Writes, ATTACH, state-changing pragmas and extensions are refused\n"
      "by SQLite itself. Views: calls, call_runs, call_summaries, events, cuda_events,\n"
      "hip_events, nccl_events, host_events, tcp_events, stacks; tables: sessions, ops,\n"
      "sources, process_names, libraries, kernel_names, causal_chains, inflight,\n"
      "device_samples, device_events (where the GPUs were sampled) (docs/schema.md).\n"
      "Functions: error_name(api, ret) and error_class(api, ret), a return code's vendor\n"
      "name and class (api as in calls.api: cuda_runtime, hip, nccl; NULL for 0);\n"
      "sketch_quantile(sketch, q), sketch_count(sketch) and the aggregate sketch_merge(sketch),\n"
      "over call_seconds' per-second latency sketches.\n"
      "With --source clickhouse://HOST:8123/DB the statement runs in ClickHouse with\n"
      "readonly=1 (views calls, host_events; tables in docs/fleet.md), and rows stream out as\n"
      "TSVWithNames (or a JSON array with --json) as they arrive.");
  auto o = std::make_shared<QueryOpts>();
  cmd->add_option("--db,-d", o->db, "Trace file (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd->add_option("--source", o->source,
                  "Query a fleet in ClickHouse instead of a file: clickhouse://HOST:8123/DB");
  cmd->add_option("args", o->args, "[PATH] SQL")->required()->expected(1, 2);
  cmd->add_flag("--json", o->json, "Print a JSON array of row objects");
  // Digits only: "-1" converted to the largest size_t, an unlimited answer no one asked for
  // (and, for --source, a limit + 1 of 0).
  cmd->add_option("--limit", o->limit, "Stop after this many rows")
      ->check(CLI::Validator(
          [](std::string& v) {
            return !v.empty() && v.size() <= 15 && v.find_first_not_of("0123456789") == v.npos
                       ? ""
                       : "expected a number of rows, 0 to 999999999999999";
          },
          "ROWS"))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Abort the statement after this many seconds")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--max-temp", o->max_temp,
                  "Temporary files SQLite may write for the statement's sorts, GROUP BY and "
                  "DISTINCT (1GiB, 500MiB); a statement that needs more fails, naming the limit")
      ->check(size_validator())
      ->capture_default_str();
  cmd->callback([&ctx, o] { ctx.exit_code = run_query_command(*o); });
}

}  // namespace ingero::app
