// Child processes for tests: spawn with pipes, read lines with timeouts, signal, reap.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace ingero::test {

class Subprocess {
 public:
  // argv[0] is the program path; env entries ("K=V") are added to the current environment.
  static Subprocess spawn(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {});
  Subprocess() = default;
  Subprocess(Subprocess&& o) noexcept;
  Subprocess& operator=(Subprocess&& o) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool ok() const { return pid_ > 0; }
  // Reads stdout/stderr until a line containing `needle` arrives; false on timeout/EOF.
  bool wait_stdout_line(const std::string& needle, std::chrono::milliseconds timeout,
                        std::string* line = nullptr);
  bool wait_stderr_line(const std::string& needle, std::chrono::milliseconds timeout,
                        std::string* line = nullptr);
  void write_stdin(const std::string& s);
  void close_stdin();
  void signal(int sig);
  // Waits for exit (draining output); returns the exit code, 128+sig if killed, -1 on timeout.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool wait_line(int which, const std::string& needle, std::chrono::milliseconds timeout,
                 std::string* line);
  void pump(int timeout_ms);
  pid_t pid_ = -1;
  int in_ = -1, outfd_ = -1, errfd_ = -1;
  std::string out_, err_;
  size_t out_pos_ = 0, err_pos_ = 0;
  int status_ = -1;
  bool reaped_ = false;
};

// Runs to completion; returns exit code and fills out/err.
int run_command(const std::vector<std::string>& argv, std::string* out = nullptr,
                std::string* err = nullptr, const std::vector<std::string>& env = {},
                std::chrono::milliseconds timeout = std::chrono::seconds(120));

// The children of `parent` named `comm` (their /proc/PID/stat), and whether a process has ended
// (gone, or a zombie waiting for whoever adopted it).
std::vector<pid_t> children_named(pid_t parent, const std::string& comm);
bool process_ended(pid_t pid);
// Turns core dumps off for this process and what it starts: for planted crashes (a dump written
// slowly keeps a crashed child's descriptors open, its death unseen, for as long as it takes).
void no_core_dumps();

// A full disk for a command (no root needed): in a private mount namespace (`unshare -rm`),
// `mnt` becomes a tmpfs of `size` ("4m"), the shell `setup` puts the test's files there, a
// filler takes all but `free_kib` KiB, and the shell `steps` run, all before the mount goes.
// Returns their exit status, or kNoTmpfs where no such mount can be made here.
inline constexpr int kNoTmpfs = 99;
int run_on_full_tmpfs(const std::string& mnt, const std::string& size, const std::string& setup,
                      int free_kib, const std::string& steps, std::string* out, std::string* err);

}  // namespace ingero::test
