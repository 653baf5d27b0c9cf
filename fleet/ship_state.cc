#include "fleet/ship_state.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "fleet/tsv.h"

namespace ingero::fleet {
namespace {

// Runs a small SELECT and parses its TabSeparated rows. `one_row`: the statement always gives
// exactly one row (an aggregate without GROUP BY): any other answer (an empty body from
// something that is not ClickHouse) is an error, never "nothing stored yet".
ingero::Status rows(ClickHouseClient& client, const std::string& sql, size_t columns,
                    const std::function<void(const std::vector<TsvField>&)>& fn,
                    bool one_row = false) {
  std::string error;
  TsvStream parser(columns, [&](const std::vector<TsvField>& f) {
    fn(f);
    return true;
  });
  auto st = client.stream(
      sql + " FORMAT TabSeparated", {}, [&](std::string_view c) { return parser.feed(c); },
      client.options().request_timeout_ms);
  if (!st) return st;
  if (!parser.finish() || !parser.error().empty())
    return ingero::make_error("ClickHouse at " + client.endpoint().display() + ": " +
                              parser.error());
  if (one_row && parser.rows() != 1)
    return ingero::make_error(
        "ClickHouse at " + client.endpoint().display() + " answered '" + sql + "' with " +
        (parser.rows() ? std::to_string(parser.rows()) + " rows" : "no row (an empty body)") +
        " where ClickHouse gives one: nothing it says about what it stores can be trusted (is "
        "this a ClickHouse server, or something in front of it that does not pass answers?)");
  return {};
}

int64_t to_i64(const TsvField& f) { return f.null ? 0 : std::stoll(f.text); }
uint64_t to_u64(const TsvField& f) { return f.null ? 0 : std::stoull(f.text); }

}  // namespace

std::string sql_string_list(const std::vector<std::string>& values) {
  std::string s = "(";
  for (const auto& v : values) s += (s.size() > 1 ? ", " : "") + sql_quote(v);
  return s + (values.empty() ? "''" : "") + ")";
}

std::string ship_query_prefix(uint64_t file_start) {
  return "ingero-ship-" + std::to_string(file_start) + "-";
}

ingero::Status await_inserts_in_flight(ClickHouseClient& client, const std::string& prefix,
                                       int wait_ms) {
  // substring, not startsWith (not in 18.16); the prefix is digits, letters and dashes.
  const std::string ours =
      "substring(query_id, 1, " + std::to_string(prefix.size()) + ") = " + sql_quote(prefix);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (true) {
    uint64_t running = 0;
    auto st = rows(
        client, "SELECT count() FROM system.processes WHERE " + ours, 1,
        [&](const auto& f) { running = to_u64(f[0]); }, true);
    if (!st) return st;
    if (!running) return {};
    // Past the drain's deadline too (the tracer's exit bound, a stop signal): the KILL below
    // then fails at once, and the resume point is not read.
    if (std::chrono::steady_clock::now() >= until || client.deadline_passed()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (auto r = client.execute("KILL QUERY WHERE " + ours + " SYNC"); !r) return r.error();
  return {};
}

namespace {

// The database's views: name -> column -> type.
using ViewColumns = std::map<std::string, std::map<std::string, std::string>>;

// "table IN (the database's views)", as SQL over system.columns.
std::string is_view_sql(const std::string& db) {
  return "table IN (SELECT name FROM system.tables WHERE database = " + sql_quote(db) +
         " AND engine = 'View')";
}

// Drops each of ours that an earlier build defined differently (ch_schema.h: view_outdated).
ingero::Status drop_outdated(ClickHouseClient& client, const ViewColumns& views) {
  const std::string& db = client.endpoint().database;
  for (const std::string& name : view_names())
    if (auto it = views.find(name); it != views.end() && view_outdated(name, it->second))
      if (auto r = client.execute("DROP TABLE IF EXISTS " + db + "." + name); !r) return r.error();
  return {};
}

}  // namespace

ingero::Status drop_outdated_views(ClickHouseClient& client) {
  const std::string& db = client.endpoint().database;
  ViewColumns views;
  auto st = rows(client,
                 "SELECT table, name, type FROM system.columns WHERE database = " + sql_quote(db) +
                     " AND " + is_view_sql(db),
                 3, [&](const auto& f) { views[f[0].text][f[1].text] = f[2].text; });
  if (!st) return st;
  return drop_outdated(client, views);
}

ingero::Status ensure_schema(ClickHouseClient& client) {
  const std::string& db = client.endpoint().database;
  // The database and tables first, their missing columns next, the views over them last: 18.16
  // checks a view's SELECT even where the view exists, so a database made before a column
  // (runq_ns) refused every ship at the view, before the ALTER that adds it was reached.
  std::vector<std::string> views;
  for (const std::string& ddl : local_ddl(db)) {
    if (ddl.rfind("CREATE VIEW", 0) == 0) {
      views.push_back(ddl);
      continue;
    }
    if (auto r = client.execute(ddl); !r) return r.error();
  }
  std::set<std::pair<std::string, std::string>> have;
  std::map<std::pair<std::string, std::string>, std::string> type_of;
  ViewColumns view_columns;  // the same read says which tables are views
  auto st = rows(client,
                 "SELECT table, name, type, " + is_view_sql(db) +
                     " FROM system.columns WHERE database = " + sql_quote(db),
                 4, [&](const auto& f) {
                   have.insert({f[0].text, f[1].text});
                   type_of[{f[0].text, f[1].text}] = f[2].text;
                   if (f[3].text == "1") view_columns[f[0].text][f[1].text] = f[2].text;
                 });
  if (!st) return st;
  // The tables were just created if absent: a server that lists no column of theirs stored
  // nothing (an endpoint answering 200 with an empty body), and nothing it says can be trusted.
  if (have.empty())
    return ingero::make_error("ClickHouse at " + client.endpoint().display() +
                              " lists no column of the tables it was just asked to create (its "
                              "answer to the read of system.columns was empty): nothing it says "
                              "about what it stores can be trusted (is this a ClickHouse server, "
                              "or something in front of it that does not pass answers?)");
  // A table of that name that is not ingero's (none of its columns, or one of another type)
  // cannot be mended by retrying: its ALTER or every insert failed the same way until --timeout
  // (5 minutes), or for ever under a tracer.
  for (const TableSpec& t : fleet_tables()) {
    size_t ours = 0;
    for (const ColumnSpec& c : t.columns) {
      auto it = type_of.find({t.name, c.name});
      if (it == type_of.end()) continue;
      ++ours;
      if (it->second != c.type) {
        client.refuse_for_good();
        return ingero::make_error("ClickHouse at " + client.endpoint().display() + ": " + db + "." +
                                  t.name + "." + c.name + " is " + it->second +
                                  " where ingero writes " + c.type +
                                  ": the table is not ingero's (ship into another database)");
      }
    }
    bool exists =
        std::any_of(have.begin(), have.end(), [&](const auto& tc) { return tc.first == t.name; });
    if (exists && ours == 0) {
      client.refuse_for_good();
      return ingero::make_error("ClickHouse at " + client.endpoint().display() + ": " + db + "." +
                                t.name +
                                " has none of ingero's columns: the table is not ingero's (ship "
                                "into another database)");
    }
  }
  for (const TableSpec& t : fleet_tables())
    for (const ColumnSpec& c : t.columns)
      if (!have.count({t.name, c.name}))
        if (auto r = client.execute("ALTER TABLE " + db + "." + t.name + " ADD COLUMN " + c.name +
                                    " " + c.type);
            !r)
          return r.error();
  // A view an earlier build made differently is made anew (drop_outdated_views).
  if (auto st = drop_outdated(client, view_columns); !st) return st;
  for (const std::string& ddl : views)
    if (auto r = client.execute(ddl); !r) return r.error();
  return {};
}

std::string cgroup_content(const SpoolRow& r) {
  std::string s;
  const TableSpec* t = find_table("cgroup_metadata");
  for (size_t i = 2; i < t->columns.size(); ++i) s += (i > 2 ? "\x1f" : "") + r.text(int(i));
  return s;
}

std::string cgroup_content_sql() {
  std::string s;
  const TableSpec* t = find_table("cgroup_metadata");
  for (size_t i = 2; i < t->columns.size(); ++i) {
    const ColumnSpec& c = t->columns[i];
    s += std::string(i > 2 ? ", '\\x1f', " : "") +
         (c.type.rfind("Nullable", 0) == 0 ? "ifNull(" + c.name + ", '')" : c.name);
  }
  return "concat(" + s + ")";
}

ingero::Result<ShipState> read_ship_state(ClickHouseClient& client, const Spool& spool) {
  ShipState s;
  const std::string db = client.endpoint().database + ".";
  const std::string nodes = sql_string_list(spool.nodes());
  const std::string file = std::to_string(spool.file_start());
  const std::string mine = " WHERE node IN " + nodes + " AND file_start = " + file;
  try {
    for (const TableSpec& t : fleet_tables()) {
      if (t.mode != ShipMode::kRowid) continue;
      ingero::Status st = rows(
          client, "SELECT max(src_id) FROM " + db + t.name + mine, 1,
          [&](const auto& f) { s.high_water[t.name] = to_i64(f[0]); }, true);
      if (!st) return st.error();
    }
    auto st = rows(client,
                   "SELECT node, started_at, max(stopped_at), any(host), any(flags) FROM " + db +
                       "sessions" + mine + " GROUP BY node, started_at",
                   5, [&](const auto& f) {
                     s.sessions[{f[0].text, to_u64(f[1])}] = to_u64(f[2]);
                     s.identity[{f[0].text, to_u64(f[1])}] = {f[3].text, f[4].text};
                   });
    if (!st) return st.error();
    std::string starts;
    for (const SpoolSession& ss : spool.sessions())
      starts += (starts.empty() ? "" : ", ") + std::to_string(ss.started_at);
    if (!starts.empty())
      st = rows(client,
                "SELECT node, started_at, min(file_start) FROM " + db + "sessions WHERE node IN " +
                    nodes + " AND started_at IN (" + starts + ") AND file_start != " + file +
                    " GROUP BY node, started_at",
                3, [&](const auto& f) {
                  s.elsewhere[{f[0].text, to_u64(f[1])}] = to_u64(f[2]);
                });
    if (!st) return st.error();
    st = rows(client,
              "SELECT node, host FROM " + db + "sessions WHERE node IN " + nodes +
                  " GROUP BY node, host ORDER BY node, host LIMIT 1000",
              2, [&](const auto& f) { s.hosts[f[0].text].insert(f[1].text); });
    if (!st) return st.error();
    st = rows(client, "SELECT DISTINCT node, session_start FROM " + db + "causal_chains" + mine, 2,
              [&](const auto& f) {
                s.chains.insert({f[0].text, to_u64(f[1])});
              });
    if (!st) return st.error();
    st = rows(client,
              "SELECT DISTINCT stack_id FROM " + db +
                  "stack_frames WHERE node = " + sql_quote(spool.origin_node()),
              1, [&](const auto& f) { s.stacks.insert(to_i64(f[0])); });
    if (!st) return st.error();
    st = rows(client,
              "SELECT node, pid, max(seen_at) FROM " + db + "process_names WHERE node IN " + nodes +
                  " GROUP BY node, pid",
              3, [&](const auto& f) {
                s.processes[{f[0].text, uint32_t(to_u64(f[1]))}] = to_u64(f[2]);
              });
    if (!st) return st.error();
    st = rows(client,
              "SELECT DISTINCT node, cgroup_id, " + cgroup_content_sql() + " FROM " + db +
                  "cgroup_metadata WHERE node = " + sql_quote(spool.origin_node()),
              3, [&](const auto& f) {
                s.cgroups.insert({f[0].text, to_i64(f[1]), f[2].text});
              });
    if (!st) return st.error();
  } catch (const std::exception& e) {
    return ingero::make_error("ClickHouse at " + client.endpoint().display() +
                              ": unexpected answer reading the shipped state (" + e.what() + ")");
  }
  s.valid = true;
  return s;
}

}  // namespace ingero::fleet
