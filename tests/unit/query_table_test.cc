// `ingero query`'s table (app/result_printer.cc): a value past 80 characters is cut on a
// character's boundary and the cut is said on stderr; widths count characters, not bytes.
#include <gtest/gtest.h>

#include <sstream>

#include "app/result_printer.h"
#include "test_paths.h"
#include "tests/support/damaged_trace.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

store::QueryResult one_column(std::vector<std::string> values) {
  store::QueryResult r;
  r.columns = {"v"};
  for (auto& v : values) r.rows.push_back({store::Value(std::move(v))});
  return r;
}

TEST(QueryTable, ALongValueIsCutOnACharacterAndSaid) {
  // 76 ASCII characters and five two-byte ones: 81 characters, 86 bytes. Cut to 77 characters:
  // the 76 and one é, whole (a cut at byte 77 wrote half of one).
  std::string accented = std::string(76, 'x') + "\u00e9\u00e9\u00e9\u00e9\u00e9";
  std::string exact(80, 'y');  // 80 characters: whole
  std::ostringstream out;
  EXPECT_EQ(app::print_table(out, one_column({accented, exact, "\u00e9"})), 1u);
  std::string want_cut = std::string(76, 'x') + "\u00e9...";
  EXPECT_EQ(out.str(), "v" + std::string(79, ' ') + "\n" + std::string(80, '-') + "\n" + want_cut +
                           "\n" + exact + "\n" + "\u00e9" + std::string(79, ' ') + "\n(3 rows)\n");
}

TEST(QueryTable, TheCommandSaysHowManyValuesItCut) {
  std::string db = write_free_calls(temp_path("cut.db"), 10);
  std::string out, err;
  ASSERT_EQ(run_command({INGERO_BIN, "query", "--db", db,
                         "SELECT printf('%.100c', 'x') AS a, printf('%.90c', 'y') AS b, 'z' AS c"},
                        &out, &err),
            0)
      << err;
  EXPECT_EQ(err,
            "ingero query: 2 values longer than 80 characters cut in the table (--json gives "
            "every value whole)\n");
  EXPECT_NE(out.find(std::string(77, 'x') + "...  " + std::string(77, 'y') + "...  z"),
            std::string::npos)
      << out;
  // --json: whole, and nothing said.
  ASSERT_EQ(
      run_command({INGERO_BIN, "query", "--json", "--db", db, "SELECT printf('%.100c', 'x') AS a"},
                  &out, &err),
      0)
      << err;
  EXPECT_EQ(err, "");
  EXPECT_EQ(out, "[{\"a\":\"" + std::string(100, 'x') + "\"}]\n");
}

}  // namespace
}  // namespace ingero::test
