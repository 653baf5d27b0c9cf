// Where a trace goes without --db: ~/.ingero/ingero.db, and whose ~ that is.
//
// `ingero trace` runs as root, often through sudo, su or a service manager that may keep the
// calling user's HOME (`sudo -E`, `su` without `-`, sudoers' env_keep). Root writing a trace
// into a folder its user controls is how a planted link or file makes root write elsewhere. So
// HOME is taken only when the folder it names (or, when it does not exist yet, the nearest one
// above it that does) belongs to the effective user, or to root; otherwise ~ is the effective
// user's own home from the password database (root's: /root), and `trace` says so.
#pragma once

#include <sys/types.h>

#include <string>

namespace ingero::app {

// What the choice depends on, gathered by default_db_path() (a test builds its own).
struct HomeFacts {
  uid_t euid = 0;
  std::string home_env;           // $HOME ("" when unset)
  bool home_owner_known = false;  // HOME, or its nearest existing ancestor, could be stat()ed
  uid_t home_owner = 0;           // the owner of that folder
  std::string passwd_home;        // the effective user's home in the password database ("": none)
};

// The home folder whose .ingero/ingero.db is the default trace. `note` (when not null) gets a
// sentence for people when HOME was set and not taken, else "".
std::string choose_trace_home(const HomeFacts& facts, std::string* note);

// The facts of this process.
HomeFacts current_home_facts();

}  // namespace ingero::app
