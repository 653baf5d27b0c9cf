// Names from the traced system reach a terminal: a process's comm (any process sets its own)
// and a node name shipped from another host were printed raw by explain and query's table,
// escape sequences and all (`\e]0;pwned\a\e[2J` retitled and cleared the reader's terminal).
#include "app/terminal_text.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

#include "test_paths.h"
#include "tests/support/run_ingero.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(TerminalText, ControlCharactersButNewlineAndTabAreWrittenAsEscapes) {
  std::ostringstream to;
  {
    app::TerminalText t(to);
    t << "a\x1b]0;pwned\x07" << '\x1b' << "[2J\tb\n"
      << std::string(1, '\0') << "\x7f"
      << "é";
  }
  EXPECT_EQ(to.str(), "a\\x1b]0;pwned\\x07\\x1b[2J\tb\n\\x00\\x7fé");
}

// The C1 controls, U+0080..U+009F (U+009B is CSI to a terminal that takes C1), were printed raw
// (helper-73); other characters of the same lead byte, and a lead byte last, are kept.
TEST(TerminalText, C1ControlsAreWrittenAsEscapes) {
  std::ostringstream to;
  {
    app::TerminalText t(to);
    t << "x\xc2\x9b"
      << "31m \xc2\x85|\xc2\xa9|";
    t << '\xc2';
    t << '\x9b' << "\xc2";
  }
  EXPECT_EQ(to.str(), "x\\u009b31m \\u0085|\xc2\xa9|\\u009b\xc2");
}

TEST(TerminalText, ExplainPrintsATracedNameThatHoldsEscapesAsText) {
  std::string db = temp_path("evil.db");
  ASSERT_TRUE(unpack_fixture("h100/starve", db));
  std::string out, err;
  ASSERT_EQ(run_command({"sqlite3", db,
                         "UPDATE events SET comm = 'py' || char(27) || ']0;pwned' || char(7) || "
                         "char(27) || '[2J' WHERE comm = 'python3'; UPDATE process_names SET "
                         "name = 'py' || char(27) || ']0;pwned' || char(7) || char(27) || '[2J' "
                         "WHERE name = 'python3'"},
                        &out, &err),
            0)
      << err;
  auto r = run_ingero({"explain", "--db", db});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("py\\x1b]0;pwned\\x07\\x1b[2J"), std::string::npos) << r.out;
  // query's table the same.
  r = run_ingero({"query", "--db", db, "SELECT DISTINCT comm FROM calls WHERE comm LIKE 'py%'"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("py\\x1b]0;pwned\\x07\\x1b[2J"), std::string::npos) << r.out;
  // JSON escapes them itself.
  r = run_ingero({"explain", "--db", db, "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("py\\u001b]0;pwned\\u0007\\u001b[2J"), std::string::npos);
}

// security.md: a node name shipped from another host reaches the reader's terminal as text too:
// here a merged file whose node gpu-node-02 is renamed with a title-setting escape.
TEST(TerminalText, ANodeNameThatHoldsEscapesIsPrintedAsText) {
  std::string db = temp_path("evil-node.db");
  std::filesystem::copy_file(INGERO_FIXTURES_DIR "/ingero-go/sample-cluster.db", db);
  std::string out, err;
  for (const char* table : {"events", "causal_chains", "sessions"})
    ASSERT_EQ(run_command({"sqlite3", db,
                           std::string("UPDATE ") + table +
                               " SET node = 'gpu' || char(27) || ']0;pwned' || char(7) || '-02' "
                               "WHERE node = 'gpu-node-02'"},
                          &out, &err),
              0)
        << err;
  const std::string shown = "gpu\\x1b]0;pwned\\x07-02";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"explain", "--db", db},
        {"explain", "--db", db, "--node", "gpu\x1b]0;pwned\x07-02"},
        {"query", "--db", db, "SELECT DISTINCT node FROM calls ORDER BY node"}}) {
    auto r = run_ingero(args);
    ASSERT_EQ(r.rc, 0) << args[0] << ": " << r.err;
    EXPECT_EQ((r.out + r.err).find('\x1b'), std::string::npos) << args[0];
    EXPECT_EQ((r.out + r.err).find('\x07'), std::string::npos) << args[0];
    EXPECT_NE(r.out.find(shown), std::string::npos) << args[0] << ": " << r.out;
  }
}

}  // namespace
}  // namespace ingero::test
