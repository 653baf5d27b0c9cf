#include "app/default_trace_path.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "app/commands.h"

namespace ingero::app {

std::string choose_trace_home(const HomeFacts& f, std::string* note) {
  if (note) note->clear();
  const bool trusted = f.home_owner == f.euid || f.home_owner == 0;
  // Unknown owner: nothing of HOME exists, not even "/" (a relative HOME): taken as given.
  if (!f.home_env.empty() && (!f.home_owner_known || trusted)) return f.home_env;
  std::string home = !f.passwd_home.empty() ? f.passwd_home
                     : f.euid == 0          ? std::string("/root")
                     : !f.home_env.empty()  ? f.home_env  // nothing better for a user without one
                                            : std::string("/");
  if (note && !f.home_env.empty() && home != f.home_env)
    *note = "HOME is " + f.home_env + ", which belongs to uid " + std::to_string(f.home_owner) +
            ", not to the user running ingero (uid " + std::to_string(f.euid) +
            "): the default trace is " + home + "/.ingero/ingero.db (--db chooses another)";
  return home;
}

HomeFacts current_home_facts() {
  HomeFacts f;
  f.euid = geteuid();
  if (const char* h = getenv("HOME")) f.home_env = h;
  if (!f.home_env.empty()) {
    // HOME itself, or the nearest folder above it that exists (trace creates what is missing).
    std::filesystem::path p = std::filesystem::path(f.home_env).lexically_normal();
    while (true) {
      struct stat st {};
      if (stat(p.c_str(), &st) == 0) {
        f.home_owner_known = true;
        f.home_owner = st.st_uid;
        break;
      }
      if (!p.has_relative_path()) break;
      p = p.parent_path();
    }
  }
  long size = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? size_t(size) : 16384);
  struct passwd pw {
  }, *found = nullptr;
  if (getpwuid_r(f.euid, &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir)
    f.passwd_home = found->pw_dir;
  return f;
}

std::string default_db_path(std::string* note) {
  return choose_trace_home(current_home_facts(), note) + "/.ingero/ingero.db";
}

std::string default_db_path() { return default_db_path(nullptr); }

}  // namespace ingero::app
