// fleet/ without a server: TabSeparated escaping and the streaming parser, ClickHouse URLs,
// the DDL's shape (what 18.16 and current versions both accept), gzip bodies, and the spool's
// view of a file archived while it is open.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "compress/gzip.h"
#include "fleet/ch_schema.h"
#include "fleet/clickhouse_endpoint.h"
#include "fleet/spool.h"
#include "fleet/tsv.h"
#include "store/event_columns.h"
#include "store/sqlite_db.h"
#include "store/table_defs.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::fleet {
namespace {

TEST(FleetTsv, EscapesEverySpecialByteAndRoundTrips) {
  std::string nasty = std::string("a\tb\nc\\d\re") + '\0' + "f\bg\fh\\N 'q' \xff\xfe";
  std::string out;
  append_tsv_escaped(out, nasty);
  EXPECT_EQ(out, std::string("a\\tb\\nc\\\\d\\re\\0f\\bg\\fh\\\\N 'q' \xff\xfe"));
  EXPECT_EQ(out.find('\t'), std::string::npos);
  EXPECT_EQ(out.find('\n'), std::string::npos);
  std::vector<TsvField> f;
  ASSERT_TRUE(parse_tsv_line(out + "\t\\N\t", f));
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].text, nasty);
  EXPECT_FALSE(f[0].null);
  EXPECT_TRUE(f[1].null);
  EXPECT_EQ(f[2].text, "");
  EXPECT_FALSE(f[2].null);
  EXPECT_FALSE(parse_tsv_line("dangling\\", f));
}

TEST(FleetTsv, StreamParsesRowsSplitAnywhereAndStops) {
  std::string body = "1\tx\\ty\n22\t\\N\n333\tz\n";
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    std::vector<std::string> got;
    TsvStream s(2, [&](const std::vector<TsvField>& f) {
      got.push_back(f[0].text + "|" + (f[1].null ? "NULL" : f[1].text));
      return true;
    });
    ASSERT_TRUE(s.feed(body.substr(0, cut)));
    ASSERT_TRUE(s.feed(body.substr(cut)));
    ASSERT_TRUE(s.finish());
    EXPECT_EQ(got, (std::vector<std::string>{"1|x\ty", "22|NULL", "333|z"})) << cut;
  }
  size_t n = 0;
  TsvStream stop(2, [&](const std::vector<TsvField>&) { return ++n < 2; });
  EXPECT_FALSE(stop.feed(body));
  EXPECT_TRUE(stop.finish());  // stopped on purpose: not an error
  EXPECT_EQ(n, 2u);
  // A ClickHouse exception written into a streamed body is a malformed row, named.
  TsvStream bad(2, [](const std::vector<TsvField>&) { return true; });
  EXPECT_FALSE(bad.feed("1\tx\nCode: 241, e.displayText() = DB::Exception: Memory limit\n"));
  EXPECT_NE(bad.error().find("Code: 241"), std::string::npos);
  TsvStream cut(2, [](const std::vector<TsvField>&) { return true; });
  EXPECT_TRUE(cut.feed("1\tx\n2\t"));
  EXPECT_FALSE(cut.finish());
  EXPECT_NE(cut.error().find("truncated"), std::string::npos);
}

TEST(FleetEndpoint, ParsesWhatUsersTypeAndRefusesTheRest) {
  unsetenv(kPasswordEnv);
  auto e = parse_endpoint("http://ch1.example:8124/fleet");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->base, "http://ch1.example:8124");
  EXPECT_EQ(e->database, "fleet");
  EXPECT_EQ(e->display(), "http://ch1.example:8124/fleet");
  e = parse_endpoint("clickhouse://reader@10.0.0.5");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->base, "http://10.0.0.5:8123");
  EXPECT_EQ(e->database, "ingero");
  EXPECT_EQ(e->user, "reader");
  e = parse_endpoint("clickhouses://h/db/");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->base, "https://h:8443");
  setenv(kPasswordEnv, "s3cret", 1);
  EXPECT_EQ(parse_endpoint("https://h/db")->password, "s3cret");
  unsetenv(kPasswordEnv);
  // One parser for every command: both schemes name the same server.
  EXPECT_EQ(parse_endpoint("clickhouse://h:9000/db")->display(),
            parse_endpoint("http://h:9000/db")->display());
  EXPECT_EQ(parse_endpoint("clickhouses://h/db")->base, parse_endpoint("https://h/db")->base);
  struct Bad {
    const char* url;
    const char* says;
    const char* shown = nullptr;  // the URL as said back, where not as given
  };
  for (const Bad& b :
       {Bad{"tcp://h/db", "expected clickhouse://HOST:8123/DB or http://HOST:8123/DB"},
        // A password is not said back: the line would carry it into a service's logs.
        Bad{"http://u:S3cret!@h/db", "no password in the URL", "http://u:***@h/db"},
        Bad{"http://h:99999/db", "bad port"}, Bad{"http://h/db;drop", "must be a plain name"},
        Bad{"http://h/db?x=1", "no query string"}, Bad{"http:///db", "no host"},
        // ship made twelve tables in ClickHouse's own database.
        Bad{"http://h/system", "the database 'system' is ClickHouse's own"},
        Bad{"http://h/INFORMATION_SCHEMA", "is ClickHouse's own"}}) {
    auto r = parse_endpoint(b.url);
    ASSERT_FALSE(r) << b.url;
    EXPECT_NE(r.error().message.find(b.says), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(b.shown ? b.shown : b.url), std::string::npos)
        << r.error().message;
    EXPECT_EQ(r.error().message.find("S3cret"), std::string::npos) << r.error().message;
  }
}

TEST(FleetSchema, DdlUsesOnlyWhatClickHouse1816Has) {
  auto ddl = local_ddl("ingero");
  // The views: calls, host_events, and rdma_counters over device_counters.
  ASSERT_EQ(ddl.size(), 1 + fleet_tables().size() + 3);
  EXPECT_EQ(ddl[0], "CREATE DATABASE IF NOT EXISTS ingero");
  for (const auto& s : ddl) {
    EXPECT_EQ(s.find("DateTime64"), std::string::npos) << s;
    EXPECT_EQ(s.find("LowCardinality"), std::string::npos) << s;
    EXPECT_EQ(s.find("TTL"), std::string::npos) << s;
  }
  for (const TableSpec& t : fleet_tables()) {
    EXPECT_EQ(t.columns.front().name, "node") << t.name;
    if (t.mode == ShipMode::kRowid) {
      EXPECT_GE(t.column_index("file_start"), 0) << t.name;
      EXPECT_GE(t.column_index("src_id"), 0) << t.name;
      EXPECT_FALSE(t.source_id.empty()) << t.name;
    }
    if (!t.day_column.empty()) {
      EXPECT_NE(t.partition.find(t.day_column), std::string::npos) << t.name;
      EXPECT_EQ(t.columns[size_t(t.column_index(t.day_column))].type, "UInt64") << t.name;
    }
  }
  const TableSpec* ev = find_table("events");
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->order_by, "(node, pid, ts_ns)");
  EXPECT_EQ(ev->partition, "toYYYYMMDD(toDateTime(intDiv(ts_ns, 1000000000), 'UTC'))");
  auto dist = distributed_ddl("fleet", "ingero_cluster", "ingero");
  ASSERT_EQ(dist.size(), ddl.size());
  EXPECT_NE(dist[4].find("ENGINE = Distributed(ingero_cluster, ingero, events, cityHash64(node))"),
            std::string::npos)
      << dist[4];
  EXPECT_NE(dist.back().find("FROM fleet.events WHERE vendor = 'host'"), std::string::npos);
}

// A view made by another build is told by its columns (ship_state.h: drop_outdated_views makes
// it anew): this build's, with dur_ns Nullable in calls, is current; calls with dur_ns as
// stored (UInt64: an entry-only launch read 0 ns), or a column missing or added, is not.
TEST(FleetSchema, AViewIsOutdatedWhenItsColumnsAreNotThisBuilds) {
  auto columns = [](View v) {
    std::map<std::string, std::string> c;
    for (const std::string& n : view_column_names(v)) c[n] = "Int64";
    return c;
  };
  auto calls = columns(View::kCalls);
  calls["dur_ns"] = "Nullable(UInt64)";
  EXPECT_FALSE(view_outdated("calls", calls));
  calls["dur_ns"] = "UInt64";
  EXPECT_TRUE(view_outdated("calls", calls));
  auto host = columns(View::kHostEvents);
  EXPECT_FALSE(view_outdated("host_events", host));
  host.erase("runq_ns");
  EXPECT_TRUE(view_outdated("host_events", host));
  host["runq_ns"] = "Nullable(Int64)";
  host["extra"] = "String";
  EXPECT_TRUE(view_outdated("host_events", host));
  std::map<std::string, std::string> rdma;
  for (const char* n :
       {"node", "session_start", "file_start", "src_id", "timestamp", "device", "port", "transport",
        "state", "rate", "counter", "value", "base_value", "unit", "is_error"})
    rdma[n] = "String";
  EXPECT_FALSE(view_outdated("rdma_counters", rdma));
  rdma.erase("is_error");
  EXPECT_TRUE(view_outdated("rdma_counters", rdma));
  EXPECT_EQ(view_names(), (std::vector<std::string>{"calls", "rdma_counters", "host_events"}));
  ASSERT_EQ(views_ddl("db").size(), view_names().size());
  for (size_t i = 0; i < view_names().size(); ++i)
    EXPECT_EQ(
        views_ddl("db")[i].rfind("CREATE VIEW IF NOT EXISTS db." + view_names()[i] + " AS", 0), 0u);
}

// One description: every column the store ships is in its ClickHouse table, with the store's
// type, read from the file's column of that name; and every column the store's mapping decodes
// from the file's views is in the fleet's views.
TEST(FleetSchema, TablesAreTheStoresDescriptionAndViewsHaveTheMappedColumns) {
  size_t described = 0;
  for (const store::TableDef& def : store::table_defs()) {
    const TableSpec* t = find_table(def.name);
    if (!t) continue;
    ++described;
    for (const store::ColumnDef& c : def.columns) {
      if (!c.shipped()) {  // not read from the file's column (events.op is the op's name)
        int i = t->column_index(c.name);
        if (i >= 0) {
          const std::string& src = t->columns[size_t(i)].source;
          EXPECT_NE(src.substr(src.find('.') + 1), c.name) << def.name << "." << c.name;
        }
        continue;
      }
      int i = t->column_index(c.fleet_name());
      ASSERT_GE(i, 0) << def.name << "." << c.name;
      EXPECT_EQ(t->columns[size_t(i)].type, c.ch_type) << def.name << "." << c.name;
      if (c.name != "node") {
        EXPECT_EQ(t->columns[size_t(i)].source.substr(t->columns[size_t(i)].source.find('.') + 1),
                  c.name)
            << def.name << "." << c.name;
      }
    }
  }
  // Every table the shipper fills is one the store describes.
  EXPECT_EQ(described, fleet_tables().size());
  const TableSpec* in = find_table("inflight");
  ASSERT_TRUE(in);
  EXPECT_EQ(in->mode, ShipMode::kRowid);
  EXPECT_EQ(in->column_list().rfind("node, session_start, file_start, src_id, what, status", 0), 0u)
      << in->column_list();

  // The file's views, as a file of this build has them.
  std::string path = test::temp_path("fleet-views.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w) << w.error().message;
  }
  auto db = store::Db::open(path, store::Db::Mode::kReadOnly);
  ASSERT_TRUE(db);
  for (auto [rows, view, fleet_view] :
       {std::tuple{store::EventRows::kCalls, "calls", View::kCalls},
        std::tuple{store::EventRows::kHostEvents, "host_events", View::kHostEvents}}) {
    auto st = (*db)->prepare(std::string("SELECT * FROM ") + view + " LIMIT 0");
    ASSERT_TRUE(st);
    std::set<std::string> file_cols;
    for (int i = 0; i < sqlite3_column_count(st->get()); ++i)
      file_cols.insert(sqlite3_column_name(st->get(), i));
    auto fleet_cols = view_column_names(fleet_view);
    for (const std::string& c : store::EventColumns::names(rows))
      if (file_cols.count(c)) {
        EXPECT_NE(std::find(fleet_cols.begin(), fleet_cols.end(), c), fleet_cols.end())
            << view << "." << c;
      }
  }
}

TEST(FleetGzip, RoundTripsAndShrinksTraceRows) {
  std::string tsv;
  for (int i = 0; i < 2000; ++i)
    tsv += "node-1\t" + std::to_string(1800000000000000000LL + i * 1000) +
           "\tnvidia\tcuda_runtime\tlaunch\tcudaLaunchKernel\t\\N\n";
  auto z = compress::gzip(tsv, 1);
  ASSERT_TRUE(z);
  EXPECT_EQ(uint8_t((*z)[0]), 0x1f);  // gzip magic
  EXPECT_EQ(uint8_t((*z)[1]), 0x8b);
  EXPECT_LT(z->size() * 8, tsv.size());
  auto back = compress::gunzip(*z);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, tsv);
  EXPECT_FALSE(compress::gunzip(z->substr(0, z->size() / 2)));
}

// A live trace writes calls into blocks as it commits: an `ingero ship` that opened the file
// before most of them still reads every call (they are counted, and read, through `events`).
TEST(FleetSpool, FollowsCallsWrittenAfterItOpened) {
  std::string db = test::temp_path("spool-follows.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w) << w.error().message;
  store::SessionInfo si;
  si.node = "n1";
  ASSERT_TRUE((*w)->begin_session(si));
  auto add = [&](int from, int to) {
    for (int i = from; i < to; ++i)
      ASSERT_TRUE((*w)->add(test::runtime_call(uint64_t(i) * 1000000, 1000, 100, 101,
                                               hal::EventKind::kLaunch, "cudaLaunchKernel")));
    ASSERT_TRUE((*w)->commit());
  };
  add(0, 1000);
  auto spool = Spool::open(db);
  ASSERT_TRUE(spool) << spool.error().message;
  const TableSpec* events = find_table("events");
  ASSERT_TRUE(events);
  auto before = (*spool)->count_after(*events, 0);
  ASSERT_TRUE(before) << before.error().message;
  EXPECT_EQ(*before, 1000u);
  add(1000, 5000);  // the block filled, and a second one began
  auto after = (*spool)->count_after(*events, 0);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(*after, 5000u);
  uint64_t read = 0;
  auto st = (*spool)->select(*events, "WHERE e.id > 0", {}, [&](const SpoolRow&) {
    ++read;
    return true;
  });
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(read, 5000u);
  ASSERT_TRUE((*w)->finish(store::SessionEnd{}));
}

}  // namespace
}  // namespace ingero::fleet
