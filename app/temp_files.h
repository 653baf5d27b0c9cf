// Files a command writes before it renames them into place, removed when a signal ends the
// process first: Ctrl-C during `export -o FILE` left .FILE.tmp-XXXXXX beside FILE (and
// `--format sqlite` its copy and the copy's journal), against "a failure leaves nothing
// behind".
#pragma once

#include <signal.h>

#include <string>

namespace ingero::app {

// While listed, `path` is removed if a signal ends the process (any whose default action does:
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ, SIGSEGV, ...; not SIGKILL, which cannot be caught);
// the signal then takes its default course (the exit status says it). A signal
// the command handles itself (trace, mcp, dashboard) is left to it. At most 8 at once; an
// empty folder among them is removed after the files.
void remove_on_fatal_signal(const std::string& path);
// No longer listed: renamed into place, or removed by its owner.
void keep_on_fatal_signal(const std::string& path);
// While set, `text` is written to standard error when such a signal ends the process, after the
// files listed are removed (empty: nothing). A listed folder is removed once its files are.
void say_on_fatal_signal(const std::string& text);

// While it lives, the signals above wait (the calling thread's mask): a file made and then listed
// was left by a signal that came between the two (export's copy folder, a test's SIGQUIT sent as
// soon as the folder showed). Made before the file, ended once it is listed; a signal held is
// delivered then, and removes it.
class FatalSignalsHeld {
 public:
  FatalSignalsHeld();
  ~FatalSignalsHeld();
  FatalSignalsHeld(const FatalSignalsHeld&) = delete;
  FatalSignalsHeld& operator=(const FatalSignalsHeld&) = delete;

 private:
  sigset_t was_;
};

}  // namespace ingero::app
