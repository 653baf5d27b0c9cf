#include "fleet/ch_schema.h"

#include <algorithm>
#include <map>

#include "store/schema.h"
#include "store/table_defs.h"

namespace ingero::fleet {
namespace {

constexpr const char* kDayPartition = "toYYYYMMDD(toDateTime(intDiv({}, 1000000000), 'UTC'))";

std::string day_partition(const std::string& column) {
  std::string s = kDayPartition;
  return s.replace(s.find("{}"), 2, column);
}

// How a table of the store (store/table_defs.h) becomes a ClickHouse table: its columns are the
// store's own shipped ones (each with the ClickHouse type the store gives it), after the head
// every fleet row carries; this says only what the store cannot: where the rows' node and
// session come from, how they ship, and how ClickHouse orders and partitions them.
struct Shape {
  std::string table;  // the store's table, and the ClickHouse table of the same name
  std::string alias;  // of the table in the SQLite FROM clause
  ShipMode mode = ShipMode::kRowid;
  std::string node;                // source of `node` ("" = alias.node)
  bool session_start = true;       // `session_start`, from the row's session
  std::vector<std::string> lead;   // store columns placed right after the head (readers index
                                   // them by position)
  std::vector<ColumnSpec> joined;  // columns read from joined tables, after the store's
  std::string joins;               // after "<table> <alias>"
  std::string order_by, day_column;
  std::string engine = "MergeTree";
};

const char* kSessionJoin = " LEFT JOIN sessions ss ON ss.id = {}.session_id";

std::string session_join(const std::string& alias) {
  std::string s = kSessionJoin;
  return s.replace(s.find("{}"), 2, alias);
}

TableSpec table_of(const Shape& sh) {
  const store::TableDef& def = store::table_def(sh.table);
  const std::string a = sh.alias + ".";
  TableSpec t;
  t.name = sh.table;
  t.mode = sh.mode;
  t.engine = sh.engine;
  t.order_by = sh.order_by;
  t.day_column = sh.day_column;
  if (!sh.day_column.empty()) t.partition = day_partition(sh.day_column);
  t.source_from = sh.table + " " + sh.alias + sh.joins;
  if (sh.session_start) t.source_from += session_join(sh.alias);
  t.columns.push_back({"node", "String", sh.node.empty() ? a + "node" : sh.node});
  if (sh.session_start)
    t.columns.push_back({"session_start", "UInt64", "coalesce(ss.started_at, 0)"});
  const bool by_id = sh.mode == ShipMode::kRowid;
  if (by_id || sh.mode == ShipMode::kChains)
    t.columns.push_back({"file_start", "UInt64", ":file_start"});
  if (by_id) {
    t.columns.push_back({"src_id", "UInt64", a + "id"});
    t.source_id = a + "id";
  }
  auto add = [&](const store::ColumnDef& c) {
    t.columns.push_back({c.fleet_name(), c.ch_type, a + c.name});
  };
  for (const std::string& name : sh.lead) add(*def.column(name));
  for (const store::ColumnDef& c : def.columns) {
    if (!c.shipped() || c.name == "node" ||
        std::find(sh.lead.begin(), sh.lead.end(), c.name) != sh.lead.end())
      continue;
    add(c);
  }
  for (const ColumnSpec& c : sh.joined) t.columns.push_back(c);
  return t;
}

Shape shape(const char* table, const char* alias, const char* order_by) {
  Shape sh;
  sh.table = table;
  sh.alias = alias;
  sh.order_by = order_by;
  return sh;
}

Shape by_day(Shape sh, const char* column) {
  sh.day_column = column;
  return sh;
}

Shape shipped_as(Shape sh, ShipMode mode, bool session_start, const char* node = "") {
  sh.mode = mode;
  sh.session_start = session_start;
  sh.node = node;
  return sh;
}

// A session's row is shipped when it starts and again when it stops: the later version
// (larger stopped_at) replaces the earlier one when parts merge; readers take the latest. It
// names its file and itself last.
TableSpec sessions() {
  Shape sh = shipped_as(shape("sessions", "s", "(node, started_at)"), ShipMode::kSessions, false);
  sh.lead = {"started_at", "stopped_at"};
  sh.engine = "ReplacingMergeTree(stopped_at)";
  TableSpec t = table_of(sh);
  t.columns.push_back({"file_start", "UInt64", ":file_start"});
  t.columns.push_back({"src_id", "UInt64", "s.id"});
  t.source_id = "s.id";
  return t;
}

// Every table but sessions, in shipping order.
std::vector<Shape> shapes() {
  std::vector<Shape> v;
  v.push_back(shape("libraries", "l", "(node, session_start, src_id)"));
  v.back().node = "coalesce(ss.node, '')";
  v.push_back(shipped_as(shape("stack_frames", "f", "(node, stack_id, frame)"), ShipMode::kStacks,
                         false, ":node"));
  // A call's vendor, api, kind and op are the names of its source and op.
  v.push_back(by_day(shape("events", "e", "(node, pid, ts_ns)"), "ts_ns"));
  v.back().joined = {{"vendor", "String", "src.vendor"},
                     {"api", "String", "src.api"},
                     {"kind", "String", "o.kind"},
                     {"op", "String", "o.name"},
                     {"nested_op", "String", std::string(kNestedOpName)}};
  v.back().joins =
      " JOIN sources src ON src.id = e.source JOIN ops o ON o.source_id = e.source AND o.op_id = "
      "e.op";
  v.push_back(by_day(
      shipped_as(shape("system_snapshots", "x", "(node, timestamp)"), ShipMode::kRowid, false),
      "timestamp"));
  v.push_back(by_day(shape("process_stats", "p", "(node, pid, timestamp)"), "timestamp"));
  // Every backend's polled counters (schema 6+); the rdma_counters view keeps the columns of
  // the table shipped before.
  v.push_back(by_day(shape("device_counters", "r", "(node, timestamp)"), "timestamp"));
  v.push_back(by_day(shape("device_samples", "d", "(node, device, timestamp)"), "timestamp"));
  v.push_back(by_day(shape("device_events", "d", "(node, timestamp)"), "timestamp"));
  // Threads stuck now: the file keeps the latest observation of each (a new one replaces the
  // row under a new id), so shipping by id sends every version; readers take the latest of
  // each (node, session_start, tid, entered_at, what), by src_id. Not partitioned: few rows.
  v.push_back(shape("inflight", "i", "(node, session_start, tid, entered_at, src_id)"));
  v.push_back(
      shipped_as(shape("process_names", "p", "(node, pid, seen_at)"), ShipMode::kProcesses, false));
  // Who the cgroup belongs to: the name columns are NULL where unknown, and in files written
  // before them. ensure_schema() adds them to tables created without.
  v.push_back(shipped_as(shape("cgroup_metadata", "g", "(node, cgroup_id)"), ShipMode::kCgroups,
                         false, ":node"));
  v.push_back(shipped_as(shape("causal_chains", "c", "(node, session_start, id)"),
                         ShipMode::kChains, true));
  return v;
}

std::string columns_ddl(const TableSpec& t) {
  std::string s;
  for (const auto& c : t.columns) s += (s.empty() ? "  " : ",\n  ") + c.name + " " + c.type;
  return s;
}

}  // namespace

std::string TableSpec::column_list() const {
  std::string s;
  for (const auto& c : columns) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

int TableSpec::column_index(std::string_view column) const {
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i].name == column) return int(i);
  return -1;
}

const std::vector<TableSpec>& fleet_tables() {
  static const std::vector<TableSpec> tables = [] {
    std::vector<TableSpec> v = {sessions()};
    for (const Shape& sh : shapes()) v.push_back(table_of(sh));
    return v;
  }();
  return tables;
}

const TableSpec* find_table(std::string_view name) {
  for (const auto& t : fleet_tables())
    if (t.name == name) return &t;
  return nullptr;
}

std::vector<std::string> local_ddl(const std::string& db) {
  std::vector<std::string> out = {"CREATE DATABASE IF NOT EXISTS " + db};
  for (const auto& t : fleet_tables()) {
    std::string s = "CREATE TABLE IF NOT EXISTS " + db + "." + t.name + " (\n" + columns_ddl(t) +
                    "\n) ENGINE = " + t.engine;
    if (!t.partition.empty()) s += "\nPARTITION BY " + t.partition;
    s += "\nORDER BY " + t.order_by;
    out.push_back(std::move(s));
  }
  for (auto& v : views_ddl(db)) out.push_back(std::move(v));
  return out;
}

std::vector<std::string> distributed_ddl(const std::string& db, const std::string& cluster,
                                         const std::string& shard_db) {
  std::vector<std::string> out = {"CREATE DATABASE IF NOT EXISTS " + db};
  for (const auto& t : fleet_tables())
    out.push_back("CREATE TABLE IF NOT EXISTS " + db + "." + t.name + " (\n" + columns_ddl(t) +
                  "\n) ENGINE = Distributed(" + cluster + ", " + shard_db + ", " + t.name +
                  ", cityHash64(node))");
  for (auto& v : views_ddl(db)) out.push_back(std::move(v));
  return out;
}

namespace {

struct ViewColumn {
  std::string name, expr;  // expr "" = the events column of that name
};

// The contract views' columns over `events`, as the trace file's views (store/contract_views.h)
// name them; the columns the store's mapping decodes (store/event_columns.h) are all here.
const std::vector<ViewColumn>& view_columns(View v) {
  static const std::vector<ViewColumn> calls = [] {
    std::vector<ViewColumn> c = {
        {"id", "src_id"},
        {"node", ""},
        {"session_start", ""},
        {"ts_ns", ""},
        // A call seen at entry only has no duration (NULL, as in the file's view; `events`
        // holds 0). `status` here is the alias below: ClickHouse substitutes aliases wherever
        // their names appear, so the column's number cannot be compared in this expression.
        {"dur_ns", "if(status = 'untimed', NULL, dur_ns)"},
        {"pid", ""},
        {"tid", ""},
        {"comm", ""},
        {"cgroup_id", ""},
        {"vendor", ""},
        {"api", ""},
        {"kind", ""},
        {"op", ""},
        {"ret", ""},
        {"status",
         "multiIf(status = 1, 'unfinished', status = 2, 'untimed', ifNull(ret, 1) = 0, 'ok', "
         "ifNull(err_class, 0) = 3, 'not_ready', 'error')"},
        {"off_cpu_ns", ""},
        {"preempts", ""},
        {"switches", ""},
        {"preemptor_pid", "peer_pid"},
        {"preemptor_comm", "peer_comm"},
        {"direction",
         "if(isNull(direction), NULL, transform(assumeNotNull(direction), [toInt64(0), 1, 2, 3, "
         "4, 5], ['H2H', 'H2D', 'D2H', 'D2D', 'default', 'peer'], ''))"}};
    for (const std::string& f : store::field_columns())
      if (f != "direction") c.push_back({f, ""});
    c.push_back({"stack_hash", ""});
    c.push_back({"library_id", ""});
    c.push_back({"stack_of_site", "ifNull(stack_of_site, 0)"});
    c.push_back({"nested_calls", "ifNull(nested_calls, 0)"});
    c.push_back({"nested_op", "nullIf(nested_op, '')"});
    return c;
  }();
  static const std::vector<ViewColumn> host = {{"id", "src_id"},
                                               {"node", ""},
                                               {"session_start", ""},
                                               {"ts_ns", ""},
                                               {"dur_ns", ""},
                                               {"timestamp_ns", "ts_ns"},
                                               {"duration_ns", "dur_ns"},
                                               {"pid", ""},
                                               {"tid", ""},
                                               {"comm", ""},
                                               {"cgroup_id", ""},
                                               {"event", "op"},
                                               {"kind", ""},
                                               {"cpu", ""},
                                               {"state", ""},
                                               {"peer_pid", ""},
                                               {"peer_tid", ""},
                                               {"peer_comm", ""},
                                               {"bytes", ""},
                                               {"count", ""},
                                               {"device", ""},
                                               {"sector", ""},
                                               {"detail", ""},
                                               {"saddr", ""},
                                               {"daddr", ""},
                                               {"sport", ""},
                                               {"dport", ""},
                                               {"code", "ret"},
                                               {"flags", ""},
                                               {"peer_cgroup", ""},
                                               {"waker_pid", ""},
                                               {"waker_tid", ""},
                                               {"runq_ns", ""},
                                               {"stack_hash", ""}};
  return v == View::kCalls ? calls : host;
}

// The columns of the trace file's rdma_counters, over device_counters.
const std::vector<ViewColumn>& rdma_columns() {
  static const std::vector<ViewColumn> c = {
      {"node", ""},
      {"session_start", ""},
      {"file_start", ""},
      {"src_id", ""},
      {"timestamp", ""},
      {"device", ""},
      {"port", ""},
      {"transport", "visitParamExtractString(attributes, 'transport')"},
      {"state", "visitParamExtractString(attributes, 'state')"},
      {"rate", "visitParamExtractString(attributes, 'rate')"},
      {"counter", ""},
      {"value", ""},
      {"base_value", ""},
      {"unit", ""},
      {"is_error", ""}};
  return c;
}

std::string select_list(const std::vector<ViewColumn>& columns) {
  std::string s;
  for (const auto& c : columns)
    s += (s.empty() ? "" : ", ") + (c.expr.empty() ? c.name : c.expr + " AS " + c.name);
  return s;
}

std::vector<std::string> names_of(const std::vector<ViewColumn>& columns) {
  std::vector<std::string> out;
  for (const auto& c : columns) out.push_back(c.name);
  return out;
}

}  // namespace

std::vector<std::string> view_column_names(View v) { return names_of(view_columns(v)); }

std::string view_select(const std::string& db, View v, const std::string& condition) {
  return "SELECT " + select_list(view_columns(v)) + "\n  FROM " + db + ".events WHERE vendor " +
         (v == View::kCalls ? "!= 'host'" : "= 'host'") +
         (condition.empty() ? "" : " AND " + condition);
}

const std::vector<std::string>& view_names() {
  static const std::vector<std::string> names = {"calls", "rdma_counters", "host_events"};
  return names;
}

std::vector<std::string> views_ddl(const std::string& db) {
  auto create = [&](const std::string& name) {
    return "CREATE VIEW IF NOT EXISTS " + db + "." + name + " AS\n";
  };
  return {create("calls") + view_select(db, View::kCalls),
          create("rdma_counters") + "SELECT " + select_list(rdma_columns()) + "\n  FROM " + db +
              ".device_counters WHERE backend = 'rdma'",
          create("host_events") + view_select(db, View::kHostEvents)};
}

bool view_outdated(const std::string& view, const std::map<std::string, std::string>& columns) {
  std::vector<std::string> want = view == "calls"         ? view_column_names(View::kCalls)
                                  : view == "host_events" ? view_column_names(View::kHostEvents)
                                                          : names_of(rdma_columns());
  if (columns.size() != want.size()) return true;
  for (const std::string& c : want)
    if (!columns.count(c)) return true;
  // Made before an entry-only call's duration was NULL in it (2026-12-02): its 0 ns counted in
  // every avg(dur_ns) of the fleet.
  if (view == "calls" && columns.at("dur_ns").rfind("Nullable(", 0) != 0) return true;
  return false;
}

}  // namespace ingero::fleet
