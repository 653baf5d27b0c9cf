// Issue 37, item 1: the default trace, ~/.ingero/ingero.db, when HOME is not the user's own.
// Root keeping a user's HOME (sudo -E, su without -) must not write into that user's folder,
// where the user could have planted a link: HOME is taken only when it belongs to the
// effective user or to root (app/default_trace_path.h).
#include "app/default_trace_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

HomeFacts facts(uid_t euid, std::string home, bool known, uid_t owner, std::string passwd) {
  HomeFacts f;
  f.euid = euid;
  f.home_env = std::move(home);
  f.home_owner_known = known;
  f.home_owner = owner;
  f.passwd_home = std::move(passwd);
  return f;
}

TEST(DefaultTracePath, HomeIsTakenOnlyWhenItIsTheUsersOwnOrRoots) {
  std::string note;
  // Root with its own HOME, and a user with theirs: as before.
  EXPECT_EQ(choose_trace_home(facts(0, "/root", true, 0, "/root"), &note), "/root");
  EXPECT_EQ(note, "");
  EXPECT_EQ(choose_trace_home(facts(1000, "/home/a", true, 1000, "/home/a"), &note), "/home/a");
  EXPECT_EQ(note, "");
  // A user's HOME in a root-owned place (/tmp, a root-made folder): root is trusted.
  EXPECT_EQ(choose_trace_home(facts(1000, "/srv/x", true, 0, "/home/a"), &note), "/srv/x");
  // Root keeping a user's HOME (sudo -E): root's own home, and a note saying so.
  EXPECT_EQ(choose_trace_home(facts(0, "/home/a", true, 1000, "/root"), &note), "/root");
  EXPECT_EQ(note,
            "HOME is /home/a, which belongs to uid 1000, not to the user running ingero (uid 0): "
            "the default trace is /root/.ingero/ingero.db (--db chooses another)");
  // ... and root without a password entry: /root.
  EXPECT_EQ(choose_trace_home(facts(0, "/home/a", true, 1000, ""), &note), "/root");
  // A user given another user's HOME: their own.
  EXPECT_EQ(choose_trace_home(facts(1000, "/home/b", true, 1001, "/home/a"), &note), "/home/a");
  EXPECT_NE(note.find("belongs to uid 1001"), std::string::npos);
  // No HOME: the password database.
  EXPECT_EQ(choose_trace_home(facts(0, "", false, 0, "/root"), &note), "/root");
  EXPECT_EQ(note, "");
  EXPECT_EQ(choose_trace_home(facts(1000, "", false, 0, ""), &note), "/");
}

TEST(DefaultTracePath, TheNearestExistingFolderDecidesForAHomeNotYetMade) {
  // HOME that does not exist yet: its nearest existing ancestor's owner decides.
  std::string base = test::temp_path("base");
  std::filesystem::create_directories(base);
  setenv("HOME", (base + "/not/yet").c_str(), 1);
  HomeFacts f = current_home_facts();
  unsetenv("HOME");
  EXPECT_EQ(f.euid, geteuid());
  EXPECT_TRUE(f.home_owner_known);
  EXPECT_EQ(f.home_owner, geteuid());
  EXPECT_EQ(choose_trace_home(f, nullptr), base + "/not/yet");
}

// Through the binary: a user (nobody) whose HOME belongs to a third user reads its own home's
// trace (nobody's is /nonexistent), not the one in HOME.
TEST(DefaultTracePath, TheBinaryIgnoresAHomeOfAnotherUser) {
  REQUIRE_ROOT();
  std::string home = test::temp_path("home");
  std::filesystem::create_directories(home + "/.ingero");
  ASSERT_EQ(chown(home.c_str(), 4242, 4242), 0);
  std::string out, err;
  int rc = test::run_command({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                              test::ingero_binary_for_nobody(), "explain"},
                             &out, &err, {"HOME=" + home});
  EXPECT_EQ(rc, 1) << err;
  EXPECT_NE(err.find("/nonexistent/.ingero/ingero.db: No such file or directory"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find(home), std::string::npos) << err;
}

}  // namespace
}  // namespace ingero::app
