// store::Db's kept statements (store/sqlite_db.h): prepared once per connection, handed back
// reset with every parameter NULL, and still right after the schema they read changes.
#include "store/sqlite_db.h"

#include <gtest/gtest.h>

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
