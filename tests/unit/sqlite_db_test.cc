// store::Db's kept statements (store/sqlite_db.h): prepared once per connection, handed back
// reset with every parameter NULL, and still right after the schema they read changes; and a
// read's locks, which opening the file again must not drop.
#include "store/sqlite_db.h"

#include <gtest/gtest.h>

#include "store/inflight_rows.h"
#include "store/read_snapshot.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

bool row(Stmt& st) {
  auto r = st.step();
  return r && *r;
}

TEST(DbCached, OneStatementPerSqlComesBackResetWithItsParametersNull) {
  auto db = Db::open(test::temp_path("cached.db"), Db::Mode::kCreate);
  ASSERT_TRUE(db) << db.error().message;
  ASSERT_TRUE((*db)->exec("CREATE TABLE t (a INTEGER, b TEXT)"));
  const std::string ins = "INSERT INTO t (a, b) VALUES (?, ?)";
  auto first = (*db)->cached(ins);
  ASSERT_TRUE(first) << first.error().message;
  (*first)->bind(1, int64_t(7)).bind(2, std::string_view("seven"));
  ASSERT_TRUE((*first)->step());
  auto again = (*db)->cached(ins);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *first);      // the same statement, not prepared again
  (*again)->bind(1, int64_t(8));  // b left unbound: NULL, not "seven"
  ASSERT_TRUE((*again)->step());
  // A query kept half-read is reset when asked for again: its first row again.
  auto sel = (*db)->cached("SELECT a, b FROM t ORDER BY a");
  ASSERT_TRUE(sel);
  ASSERT_TRUE(row(**sel));
  ASSERT_TRUE((*db)->cached("SELECT a, b FROM t ORDER BY a"));
  std::vector<std::pair<int64_t, std::string>> rows;
  while (row(**sel))
    rows.emplace_back((*sel)->int64(0), (*sel)->is_null(1) ? "NULL" : (*sel)->text(1));
  EXPECT_EQ(rows, (std::vector<std::pair<int64_t, std::string>>{{7, "seven"}, {8, "NULL"}}));
}

TEST(DbCached, AKeptInsertFollowsItsTableThroughASchemaChange) {
  auto db = Db::open(test::temp_path("cached_schema.db"), Db::Mode::kCreate);
  ASSERT_TRUE(db);
  ASSERT_TRUE((*db)->exec("CREATE TABLE t (a INTEGER)"));
  const std::string ins = "INSERT INTO t (a) VALUES (?)";
  auto st = (*db)->cached(ins);
  ASSERT_TRUE(st);
  (*st)->bind(1, int64_t(1));
  ASSERT_TRUE((*st)->step());
  ASSERT_TRUE((*db)->exec("DROP TABLE t; CREATE TABLE t (z TEXT, a INTEGER)"));
  st = (*db)->cached(ins);
  ASSERT_TRUE(st);
  (*st)->bind(1, int64_t(2));
  ASSERT_TRUE((*st)->step());
  EXPECT_EQ((*db)->query_int("SELECT sum(a) FROM t WHERE z IS NULL").value(),
            std::optional<int64_t>(2));
  // The table gone for good: the kept statement fails as a fresh one would, with SQLite's
  // reason.
  ASSERT_TRUE((*db)->exec("DROP TABLE t"));
  auto gone = (*db)->cached(ins);
  auto step = gone ? (*gone)->step() : ingero::Result<bool>(gone.error());
  ASSERT_FALSE(step);
  EXPECT_NE(step.error().message.find("no such table: t"), std::string::npos)
      << step.error().message;
}

}  // namespace
}  // namespace ingero::store

namespace ingero::store {
namespace {

// Found by a hostile-testing helper: `compact` rewrote a file while `explain` read it, and
// explain then called it damaged. Opening a second connection (explain's split read) checked
// the file by opening and closing it, and closing any descriptor of a file drops every POSIX
// lock the process holds on it: the read transaction's too. Other processes stay out for as
// long as a read lasts, whatever the process opens meanwhile.
TEST(ReadLocks, OpeningTheFileAgainKeepsOtherProcessesOutOfARead) {
  std::string path = test::temp_path("locks.db");
  {
    auto w = Db::open(path, Db::Mode::kCreate);
    ASSERT_TRUE(w) << w.error().message;
    ASSERT_TRUE((*w)->exec("CREATE TABLE t(a); INSERT INTO t VALUES (1)"));
  }
  auto r = Db::open(path, Db::Mode::kReadOnly);
  ASSERT_TRUE(r) << r.error().message;
  auto write = [&] {
    std::string out, err;
    int rc = test::run_command({"sqlite3", path, "INSERT INTO t VALUES (2)"}, &out, &err);
    return rc == 0 ? std::string("written") : err;
  };
  {
    ReadSnapshot snapshot(**r);
    ASSERT_EQ((*r)->query_int("SELECT count(*) FROM t")->value_or(0), 1);
    auto again = Db::open(path, Db::Mode::kReadOnly);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_FALSE(trace_being_written(path));
    EXPECT_NE(write().find("database is locked"), std::string::npos);
  }
  EXPECT_EQ(write(), "written");
}

}  // namespace
}  // namespace ingero::store
