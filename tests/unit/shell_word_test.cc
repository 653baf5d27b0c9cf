// A word of a command that a chain's fix gives (engine/chain.h, shell_word), pasted into a
// shell, reads back as it was. Found by a hostile-testing helper: the straggler's fix named
// node `nœud\3` bare ("--node nœud\3"), which a shell reads as "nœud3", and a node `node 2's`
// broke the line.
#include <gtest/gtest.h>

#include <string>

#include "engine/chain.h"
#include "tests/support/subprocess.h"

namespace ingero::engine {
namespace {

TEST(ShellWord, ReadsBackAsItWasInAShell) {
  EXPECT_EQ(shell_word("gpu-node-01.example.com"), "gpu-node-01.example.com");
  EXPECT_EQ(shell_word("node 2's"), "'node 2'\\''s'");
  EXPECT_EQ(shell_word(""), "''");
  for (std::string name : {"node 2's", "n\u0153ud\\3", "rack'7 \\ gpu\"1", "n\t$(id)`x`", "",
                           "\u8282\u70b9-\u00fc %27 [x]", "a;b|c&d"}) {
    std::string out;
    ASSERT_EQ(test::run_command({"/bin/sh", "-c", "printf %s " + shell_word(name)}, &out), 0)
        << name;
    EXPECT_EQ(out, name);
  }
}

}  // namespace
}  // namespace ingero::engine
