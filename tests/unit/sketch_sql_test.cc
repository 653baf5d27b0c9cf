// The sketch SQL functions (store/sketch_sql.h) on connections the store opens: merging and
// quantiles as in C++, NULLs, damaged blobs and out-of-range quantiles as errors.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/quantile_sketch.h"
#include "store/sqlite_db.h"
#include "tests/support/trace_db.h"

namespace ingero::store {
namespace {

using engine::QuantileSketch;

std::unique_ptr<Db> open_db(Db::Mode mode = Db::Mode::kCreate) {
  auto db = Db::open(test::temp_path("sketches.db"), mode);
  EXPECT_TRUE(db) << (db ? "" : db.error().message);
  return db ? std::move(*db) : nullptr;
}

// The first column of the one row `sql` returns, or the error.
struct Answer {
  std::string error;  // empty on success
  bool null = false;
  int64_t integer = 0;
  std::string blob;
};

Answer failed(std::string error) {
  Answer a;
  a.error = std::move(error);
  return a;
}

Answer ask(Db& db, const std::string& sql, const std::string* bind_blob = nullptr) {
  Answer a;
  auto st = db.prepare(sql);
  if (!st) return failed(st.error().message);
  if (bind_blob)
    sqlite3_bind_blob(st->get(), 1, bind_blob->data(), int(bind_blob->size()), SQLITE_TRANSIENT);
  auto row = st->step();
  if (!row) return failed(row.error().message);
  EXPECT_TRUE(*row) << sql;
  if (!*row) return a;
  a.null = st->is_null(0);
  a.integer = st->int64(0);
  if (sqlite3_column_type(st->get(), 0) == SQLITE_BLOB)
    a.blob.assign(static_cast<const char*>(sqlite3_column_blob(st->get(), 0)),
                  size_t(sqlite3_column_bytes(st->get(), 0)));
  return a;
}

// Per-second sketches of two ops, and one NULL sketch, in table `s`.
struct Seconds {
  std::vector<QuantileSketch> launch, sync;
};

Seconds fill(Db& db) {
  EXPECT_TRUE(db.exec("CREATE TABLE s(sec INTEGER, op TEXT, sketch BLOB)"));
  Seconds out;
  std::mt19937_64 rng(101);
  std::lognormal_distribution<double> launch(std::log(5000.0), 0.8), sync(std::log(4e6), 1.2);
  auto st = db.prepare("INSERT INTO s VALUES (?, ?, ?)");
  EXPECT_TRUE(st);
  for (int sec = 0; sec < 10; ++sec) {
    for (const char* op : {"cudaLaunchKernel", "cudaStreamSynchronize"}) {
      bool is_launch = op[4] == 'L';
      QuantileSketch s;
      for (int i = 0; i < (is_launch ? 1000 : 40); ++i)
        s.add(uint64_t(is_launch ? launch(rng) : sync(rng)));
      (is_launch ? out.launch : out.sync).push_back(s);
      std::string blob = s.serialize();
      st->bind(1, int64_t(sec)).bind(2, std::string_view(op));
      sqlite3_bind_blob(st->get(), 3, blob.data(), int(blob.size()), SQLITE_TRANSIENT);
      EXPECT_TRUE(st->step());
      st->reset();
    }
  }
  EXPECT_TRUE(db.exec("INSERT INTO s VALUES (10, 'cudaLaunchKernel', NULL)"));
  return out;
}

QuantileSketch merged(const std::vector<QuantileSketch>& parts) {
  QuantileSketch m;
  for (const auto& p : parts) m.merge(p);
  return m;
}

TEST(QuantileSketch, SqlMergeAndQuantileMatchCpp) {
  auto db = open_db();
  ASSERT_TRUE(db);
  Seconds secs = fill(*db);
  QuantileSketch launch = merged(secs.launch), sync = merged(secs.sync);
  ASSERT_EQ(launch.count(), 10000u);

  Answer blob = ask(*db, "SELECT sketch_merge(sketch) FROM s WHERE op = 'cudaLaunchKernel'");
  ASSERT_EQ(blob.error, "");
  EXPECT_EQ(blob.blob, launch.serialize());
  for (double q : {0.0, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    Answer a = ask(*db, "SELECT sketch_quantile(sketch_merge(sketch), " + std::to_string(q) +
                            ") FROM s WHERE op = 'cudaStreamSynchronize'");
    ASSERT_EQ(a.error, "");
    EXPECT_EQ(uint64_t(a.integer), sync.quantile(q)) << "q=" << q;
  }
  EXPECT_EQ(ask(*db, "SELECT sketch_count(sketch_merge(sketch)) FROM s").integer, 10400);
  EXPECT_EQ(
      ask(*db, "SELECT sketch_count(sketch) FROM s WHERE sec = 3 AND op LIKE '%Sync%'").integer,
      40);
  // One merged row per op.
  auto st = db->prepare("SELECT op, sketch_count(sketch_merge(sketch)) FROM s GROUP BY op");
  ASSERT_TRUE(st);
  std::vector<std::pair<std::string, int64_t>> rows;
  for (auto r = st->step(); r && *r; r = st->step()) rows.emplace_back(st->text(0), st->int64(1));
  EXPECT_EQ(rows, (std::vector<std::pair<std::string, int64_t>>{{"cudaLaunchKernel", 10000},
                                                                {"cudaStreamSynchronize", 400}}));
}

TEST(QuantileSketch, SqlNullsAreSkippedOrNull) {
  auto db = open_db();
  ASSERT_TRUE(db);
  fill(*db);
  std::string empty_blob = QuantileSketch().serialize();
  QuantileSketch one;
  one.add(42);
  std::string b42 = one.serialize();
  EXPECT_TRUE(ask(*db, "SELECT sketch_quantile(NULL, 0.5)").null);
  EXPECT_TRUE(ask(*db, "SELECT sketch_quantile(?, NULL)", &b42).null);
  EXPECT_TRUE(ask(*db, "SELECT sketch_count(NULL)").null);
  EXPECT_TRUE(ask(*db, "SELECT sketch_merge(sketch) FROM s WHERE sec = 10").null);  // NULLs only
  EXPECT_TRUE(ask(*db, "SELECT sketch_merge(sketch) FROM s WHERE 0").null);         // no rows
  EXPECT_EQ(ask(*db, "SELECT sketch_count(sketch_merge(sketch)) FROM s WHERE sec >= 9").integer,
            1040);
  Answer q = ask(*db, "SELECT sketch_quantile(?, 0.5)", &b42);
  EXPECT_FALSE(q.null);
  EXPECT_EQ(q.integer, 42);
  // An empty sketch is a sketch, not a NULL.
  Answer e = ask(*db, "SELECT sketch_count(?)", &empty_blob);
  EXPECT_FALSE(e.null);
  EXPECT_EQ(e.integer, 0);
}

TEST(QuantileSketch, SqlDamagedSketchIsAnError) {
  auto db = open_db();
  ASSERT_TRUE(db);
  fill(*db);
  std::string good;
  {
    QuantileSketch s;
    s.add(1000);
    good = s.serialize();
  }
  std::string cut = good.substr(0, good.size() - 1);
  EXPECT_NE(ask(*db, "SELECT sketch_quantile(?, 0.5)", &cut)
                .error.find("sketch_quantile: damaged sketch"),
            std::string::npos);
  EXPECT_NE(ask(*db, "SELECT sketch_count(?)", &cut).error.find("sketch_count: damaged sketch"),
            std::string::npos);
  EXPECT_NE(ask(*db, "SELECT sketch_count('not a blob')").error.find("damaged sketch"),
            std::string::npos);
  EXPECT_NE(ask(*db, "SELECT sketch_count(x'')").error.find("damaged sketch"), std::string::npos);
  // One damaged row among good ones fails the whole aggregate.
  auto ins = db->prepare("INSERT INTO s VALUES (11, 'cudaLaunchKernel', ?)");
  ASSERT_TRUE(ins);
  sqlite3_bind_blob(ins->get(), 1, cut.data(), int(cut.size()), SQLITE_TRANSIENT);
  ASSERT_TRUE(ins->step());
  EXPECT_NE(
      ask(*db, "SELECT sketch_merge(sketch) FROM s").error.find("sketch_merge: damaged sketch"),
      std::string::npos);
}

TEST(QuantileSketch, SqlQuantileOutsideZeroOneIsAnError) {
  auto db = open_db();
  ASSERT_TRUE(db);
  QuantileSketch s;
  s.add(7);
  s.add(9000);
  std::string b = s.serialize();
  for (const char* q : {"1.5", "-0.01", "2", "'0.5'", "x'00'"})
    EXPECT_NE(ask(*db, std::string("SELECT sketch_quantile(?, ") + q + ")", &b)
                  .error.find("sketch_quantile: q must be a number in [0, 1]"),
              std::string::npos)
        << q;
  EXPECT_EQ(ask(*db, "SELECT sketch_quantile(?, 0)", &b).integer, 7);
  EXPECT_EQ(ask(*db, "SELECT sketch_quantile(?, 1)", &b).integer, 9000);
}

TEST(QuantileSketch, SqlFunctionsAreOnEveryConnectionAndUsableInTheSchema) {
  auto db = open_db();
  ASSERT_TRUE(db);
  fill(*db);
  // Deterministic: allowed in an index expression. Innocuous: allowed in a view that a
  // connection with trusted_schema off reads.
  EXPECT_TRUE(db->exec("CREATE INDEX s_count ON s(sketch_count(sketch))"));
  EXPECT_TRUE(
      db->exec("CREATE VIEW per_sec AS SELECT sec, sketch_quantile(sketch, 0.99) AS p99 "
               "FROM s WHERE sketch IS NOT NULL"));
  std::string path = db->path();
  db.reset();
  auto ro = Db::open(path, Db::Mode::kReadOnly);
  ASSERT_TRUE(ro);
  ASSERT_TRUE((*ro)->exec("PRAGMA trusted_schema = OFF"));
  Answer a = ask(**ro, "SELECT count(*) FROM per_sec WHERE p99 > 0");
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.integer, 20);
  a = ask(**ro, "SELECT count(*) FROM s INDEXED BY s_count WHERE sketch_count(sketch) = 40");
  EXPECT_EQ(a.error, "");
  EXPECT_EQ(a.integer, 10);
}

}  // namespace
}  // namespace ingero::store
