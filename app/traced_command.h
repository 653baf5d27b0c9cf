// The command `ingero trace -- CMD ARGS` runs: forked before the probes are attached and held
// on a pipe until they are (a command that would run untraced is never exec'd), then exec'd
// at the priority ingero started with. Its status becomes the tracer's exit status, as with
// time(1) and strace(1). It inherits the descriptors ingero was started with, and none of the
// tracer's own (its sockets, files and BPF objects, whichever library opened them).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace ingero::app {

// What execvp would run: argv[0] as a path, or searched along $PATH: a regular file that may be
// executed ("" if nothing).
std::string resolve_program(const std::string& name);

// Why argv[0] cannot be run, as a shell says it: 127 and "not found in PATH" or "no such
// file" (nothing there), 126 and "is a directory", "not executable" or "bad interpreter
// PATH" (a script whose #! names nothing that runs); nullopt when it can be exec'd.
struct CannotRun {
  int status = 0;
  std::string why;
};
std::optional<CannotRun> cannot_run(const std::string& name);

// What `ingero trace` refuses before any probe is attached or the file touched, said on `err`:
// a --pid that names no running process (its trace would be empty, without a word: exit 2),
// and a command that cannot be run (a mistyped one appended an empty session to the trace:
// 127 or 126, as a shell says them). 0 when neither.
int refuse_untraceable(const std::vector<uint32_t>& pids, const std::vector<std::string>& command,
                       std::ostream& err);

// Notes the descriptors above stderr open now, as those the traced command inherits; called
// first in main(), before ingero opens any.
void note_inherited_fds();

class TracedCommand {
 public:
  TracedCommand() = default;
  TracedCommand(const TracedCommand&) = delete;
  TracedCommand& operator=(const TracedCommand&) = delete;
  ~TracedCommand();

  // Forks; the child waits for release(), sets `nice` if given, and execs argv. -1 on failure.
  int start(const std::vector<std::string>& argv, std::optional<int> nice);
  // Lets the child exec (the probes are attached).
  void release();
  // Reaps the command if it exited (non-blocking); true once it has.
  bool exited();
  void signal(int sig) const;
  // Kills and reaps a command that must not run (the tracer failed before it was released).
  void kill_and_reap();
  // Ends a command not yet released with signal `sig` (the tracer was stopped by it before
  // tracing began) and reaps it: its status says so (128 + sig).
  void end_unreleased(int sig);

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  bool done() const { return done_; }
  // Its status (128 + N when signal N ended it) once done, else `fallback`.
  int exit_code(int fallback) const;
  // "ingero: command exited with status N" / "... killed by signal N", once done.
  void describe_end(std::ostream& out) const;

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool done_ = false;
  bool never_ran_ = false;  // ended before its release (end_unreleased)
  int go_pipe_ = -1;
};

}  // namespace ingero::app
