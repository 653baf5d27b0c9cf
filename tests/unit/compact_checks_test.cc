// What compact checks before it changes a trace, found missing by a hostile test: it VACUUMed a
// file whose pages were damaged (exit 0, still damaged), and dropped the calls of a block whose
// folded form was half gone, for good. Each case is refused with exit 1 and the file left byte
// for byte; the readers of the whole trace refuse the damaged entries too, where a copied entry
// counted its block twice with exit 0.
#include <gtest/gtest.h>

#include <filesystem>

#include "store/trace_writer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/h100_fixture.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// The resnet-clean H100 trace converted to this schema: its launches folded into runs. In the
// scratch root, not the first test's folder, which goes when that test passes.
const std::string& folded_trace() {
  static const std::string path = [] {
    std::string p = scratch_root() + "/folded-resnet-clean.db";
    std::filesystem::copy_file(h100_fixture("resnet-clean", "folded", true), p,
                               std::filesystem::copy_options::overwrite_existing);
    std::string out, err;
    EXPECT_EQ(run_command({INGERO_BIN, "compact", p, "--full-rows", "1s"}, &out, &err), 0) << err;
    return p;
  }();
  return path;
}

std::string copy_of(const std::string& from, const std::string& name) {
  std::string to = temp_path(name);
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  return to;
}

struct Said {
  int rc = -1;
  std::string err;
};
Said run(const std::vector<std::string>& args) {
  Said s;
  std::string out;
  s.rc = run_command(args, &out, &s.err);
  return s;
}

const std::string kCannotMend =
    "; compact cannot mend a damaged block, and left the file as it was\n";

// A block whose every call folded into runs keeps no call beside them: that is no damage
// (compact refused such a file: "its rows do not lie in the id and time range its entry says").
TEST(CompactChecks, ABlockWhoseEveryCallFoldedIsNoDamage) {
  std::string db = temp_path("all-folded.db");
  {
    auto w = store::TraceWriter::open(db);
    ASSERT_TRUE(w) << w.error().message;
    store::SessionInfo si;
    si.mono_offset_ns = 1'700'000'000'000'000'000;
    ASSERT_TRUE((*w)->begin_session(si));
    (*w)->set_folding(true);
    (*w)->set_block_rows(1000);  // the launches' block, then a sync's two seconds later
    for (int i = 0; i < 1000; ++i) {
      hal::Event e = runtime_call(1'000'000 + uint64_t(i) * 5000, 0, 100, 100,
                                  hal::EventKind::kLaunch, "cudaLaunchKernel");
      e.timed = false;  // seen at entry only, as the tracer sees most launches
      e.has_ret = false;
      e.set(hal::Field::kFunc, i % 2 ? 0x10 : 0x20);
      ASSERT_TRUE((*w)->add(e));
    }
    ASSERT_TRUE((*w)->add(runtime_call(2'100'000'000, 1000, 100, 100, hal::EventKind::kSync,
                                       "cudaStreamSynchronize")));
    store::SessionEnd end;
    end.exit_reason = "test";
    ASSERT_TRUE((*w)->finish(end));
  }
  ASSERT_EQ(query_int(db, "SELECT count(*) FROM call_store WHERE kept = 0"), 1);
  auto r = run({INGERO_BIN, "compact", db, "--full-rows", "1s"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(query_int(db, "SELECT sum(calls) FROM call_runs"), 1000);
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls"), 1);
}

TEST(CompactChecks, DamagedPagesAreRefusedBeforeAnyChange) {
  std::string db = write_free_calls(temp_path("pages.db"), 20000);
  DamageSpots spots = damage_spots(db);
  flip_byte(db, spots.page_type, 0xff);
  std::string before = sha256_file(db);
  auto r = run({INGERO_BIN, "compact", db});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("ingero compact: " + db + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(db + ": the file is damaged (PRAGMA quick_check: "), std::string::npos)
      << r.err;
  EXPECT_EQ(sha256_file(db), before);
}

TEST(CompactChecks, ABlockHalfFoldedOrInNoFormIsRefusedByCompactAndTheReaders) {
  ASSERT_GT(query_int(folded_trace(), "SELECT count(*) FROM call_store WHERE run_data IS NOT NULL"),
            0);
  int64_t folded =
      query_int(folded_trace(), "SELECT min(id) FROM call_store WHERE run_data IS NOT NULL");
  struct Case {
    std::string name, sql, said;
  };
  const std::vector<Case> cases = {
      {"half", "UPDATE call_store SET run_data = NULL WHERE id = " + std::to_string(folded),
       "its calls are in none of its forms, or in half of its folded form"},
      {"none",
       "UPDATE call_store SET full = NULL, kept_data = NULL, run_data = NULL WHERE id = " +
           std::to_string(folded),
       "its calls are in none of its forms, or in half of its folded form"},
      {"untimed", "UPDATE call_store SET untimed = calls + 1 WHERE id = " + std::to_string(folded),
       "its entry counts @u untimed of @c calls"},
  };
  for (const Case& c : cases) {
    std::string db = copy_of(folded_trace(), c.name + ".db");
    alter_trace(db, c.sql);
    std::string said = c.said;
    if (size_t at = said.find("@u"); at != std::string::npos)
      said.replace(at, 2,
                   std::to_string(query_int(
                       db, "SELECT untimed FROM call_store WHERE id = " + std::to_string(folded))));
    if (size_t at = said.find("@c"); at != std::string::npos)
      said.replace(at, 2,
                   std::to_string(query_int(
                       db, "SELECT calls FROM call_store WHERE id = " + std::to_string(folded))));
    std::string block = db + ": call block " + std::to_string(folded) + ": " + said;
    std::string before = sha256_file(db);
    auto r = run({INGERO_BIN, "compact", db});
    EXPECT_EQ(r.rc, 1) << c.name;
    EXPECT_EQ(r.err, "ingero compact: " + block + kCannotMend) << c.name;
    EXPECT_EQ(sha256_file(db), before) << c.name;
    // explain reads the window's blocks, and refuses each case its own way (a block it cannot
    // decode, calls the summaries count and it did not read, the entry's count).
    auto e = run({INGERO_BIN, "explain", "--db", db});
    EXPECT_EQ(e.rc, 1) << c.name;
    EXPECT_EQ(e.err.rfind("ingero explain: " + db + ": ", 0), 0u) << c.name << ": " << e.err;
  }
}

// A block entered twice (a row copied, as by a careless merge of two files by hand) counted its
// calls twice: explain said 4,096 events more, exit 0.
TEST(CompactChecks, ABlockEnteredTwiceIsRefusedByCompactAndTheReaders) {
  for (const std::string table : {"call_store", "host_store"}) {
    std::string db = table == "call_store" ? write_free_calls(temp_path("twice-calls.db"), 2000)
                                           : copy_of(folded_trace(), "twice-host.db");
    ASSERT_GT(query_int(db, "SELECT count(*) FROM " + table), 0) << "no block to copy";
    std::string cols =
        table == "call_store"
            ? "node, session_id, first_id, last_id, first_ts, last_ts, end_ts, calls, untimed, "
              "kept, runs, folded, full, kept_data, run_data"
            : "node, session_id, first_id, last_id, first_ts, last_ts, end_ts, events, data";
    int64_t first = query_int(db, "SELECT min(id) FROM " + table);
    alter_trace(db, "INSERT INTO " + table + " (" + cols + ") SELECT " + cols + " FROM " + table +
                        " WHERE id = " + std::to_string(first));
    int64_t copy = query_int(db, "SELECT max(id) FROM " + table);
    int64_t from =
        query_int(db, "SELECT first_id FROM " + table + " WHERE id = " + std::to_string(first));
    int64_t to =
        query_int(db, "SELECT last_id FROM " + table + " WHERE id = " + std::to_string(first));
    std::string block = db + ": " + (table == "call_store" ? "call" : "host") + " block " +
                        std::to_string(copy) + ": its ids from " + std::to_string(from) +
                        " overlap the block before it, which ends at " + std::to_string(to);
    std::string before = sha256_file(db);
    auto r = run({INGERO_BIN, "compact", db});
    EXPECT_EQ(r.rc, 1) << table;
    EXPECT_EQ(r.err, "ingero compact: " + block + kCannotMend) << table;
    EXPECT_EQ(sha256_file(db), before) << table;
    auto e = run({INGERO_BIN, "explain", "--db", db});
    EXPECT_EQ(e.rc, 1) << table;
    EXPECT_EQ(e.err, "ingero explain: " + block + "\n") << table;
  }
}

// An entry whose start moved (to 0: explain said "events over 1795875763 s", exit 0): compact
// reads every block's ids and times and refuses it.
TEST(CompactChecks, AnEntryWhoseRangeIsNotItsRowsIsRefused) {
  std::string db = write_free_calls(temp_path("range.db"), 2000);
  alter_trace(db, "UPDATE call_store SET first_ts = 0 WHERE id = 3");
  std::string before = sha256_file(db);
  auto r = run({INGERO_BIN, "compact", db});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err, "ingero compact: " + db +
                       ": call block 3 (its calls): its rows do not lie in the id and time range "
                       "its entry says" +
                       kCannotMend);
  EXPECT_EQ(sha256_file(db), before);
}

}  // namespace
}  // namespace ingero::test
