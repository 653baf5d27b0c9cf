// Files a command writes before it renames them into place, removed when a signal ends the
// process first: Ctrl-C during `export -o FILE` left .FILE.tmp-XXXXXX beside FILE (and
// `--format sqlite` its copy and the copy's journal), against "a failure leaves nothing
// behind".
#pragma once

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "hal/result.h"

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

// A private folder (mkdtemp, 0700) beside `path`, holding one SQLite file (`name`) written there
// and renamed over `path` once whole: a failure leaves no partial file, and no one else can
// plant a link where it is written. While it lives, a signal that ends the process removes the
// file, its SQLite side files (-journal, -wal, -shm, -reserve) and the folder, then says
// `note`; its end removes whatever is left and unlists them. merge's folder stayed, with a
// partial trace in it, after a Ctrl-C.
class PrivateTraceDir {
 public:
  static ingero::Result<std::unique_ptr<PrivateTraceDir>> make(const std::string& path,
                                                               const char* what,
                                                               const std::string& name,
                                                               const std::string& note);
  ~PrivateTraceDir();
  PrivateTraceDir(const PrivateTraceDir&) = delete;
  PrivateTraceDir& operator=(const PrivateTraceDir&) = delete;
  const std::string& dir() const { return dir_; }
  const std::string& file() const { return file_; }
  // Says nothing more on a signal (from the rename on, the file may be the new one).
  void quiet() { say_on_fatal_signal(""); }

 private:
  PrivateTraceDir(std::string dir, std::string file);
  std::string dir_, file_;
  std::vector<std::string> listed_;
};

}  // namespace ingero::app
