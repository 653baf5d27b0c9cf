#include "app/temp_files.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

namespace ingero::app {

namespace {

constexpr int kSlots = 8;
// Every signal whose default action ends the process (SIGKILL and SIGSTOP cannot be caught):
// Ctrl-backslash, a file-size or CPU limit (SIGXFSZ, SIGXCPU), an alarm or a user signal left a
// copy.
constexpr int kSignals[] = {SIGHUP,  SIGINT,  SIGQUIT,   SIGILL,  SIGTRAP, SIGABRT, SIGBUS,
                            SIGFPE,  SIGUSR1, SIGSEGV,   SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
                            SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGSYS,  SIGPOLL, SIGPWR};
// Written under g_mu by the listing thread; read by the handler, which may only make system
// calls: a slot's path is complete before its flag is set, and cleared after it is reset.
char g_paths[kSlots][4096];
std::atomic<bool> g_used[kSlots];
std::mutex g_mu;
bool g_installed = false;

char g_note[1024];
std::atomic<size_t> g_note_len{0};

void on_fatal(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) (void)unlink(g_paths[i]);
  for (int i = 0; i < kSlots; ++i)  // the folders, once their files are gone
    if (g_used[i].load()) (void)rmdir(g_paths[i]);
  if (size_t n = g_note_len.load()) (void)!write(STDERR_FILENO, g_note, n);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install() {
  for (int sig : kSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace

void remove_on_fatal_signal(const std::string& path) {
  if (path.size() >= sizeof(g_paths[0])) return;
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_installed) {
    install();
    g_installed = true;
  }
  for (int i = 0; i < kSlots; ++i)
    if (!g_used[i].load()) {
      std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
      g_used[i].store(true);
      return;
    }
}

void say_on_fatal_signal(const std::string& text) {
  std::lock_guard<std::mutex> g(g_mu);
  if (!g_installed) {
    install();
    g_installed = true;
  }
  g_note_len.store(0);
  if (text.size() > sizeof g_note) return;
  std::memcpy(g_note, text.data(), text.size());
  g_note_len.store(text.size());
}

void keep_on_fatal_signal(const std::string& path) {
  std::lock_guard<std::mutex> g(g_mu);
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load() && path == g_paths[i]) {
      g_used[i].store(false);
      g_paths[i][0] = 0;
    }
}

FatalSignalsHeld::FatalSignalsHeld() {
  sigset_t held;
  sigemptyset(&held);
  for (int sig : kSignals) sigaddset(&held, sig);
  pthread_sigmask(SIG_BLOCK, &held, &was_);
}

FatalSignalsHeld::~FatalSignalsHeld() { pthread_sigmask(SIG_SETMASK, &was_, nullptr); }

ingero::Result<std::unique_ptr<PrivateTraceDir>> PrivateTraceDir::make(const std::string& path,
                                                                       const char* what,
                                                                       const std::string& name,
                                                                       const std::string& note) {
  std::filesystem::path p(path);
  std::string tmpl = ((p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path()) /
                      ("." + p.filename().string() + "." + what + "-XXXXXX"))
                         .string();
  std::optional<FatalSignalsHeld> held(std::in_place);  // until the folder is listed
  if (!::mkdtemp(tmpl.data()))
    return ingero::Error::sys("cannot create a temporary folder beside " + path, errno);
  std::unique_ptr<PrivateTraceDir> d(new PrivateTraceDir(tmpl, tmpl + "/" + name));
  say_on_fatal_signal(note);
  return d;
}

PrivateTraceDir::PrivateTraceDir(std::string dir, std::string file)
    : dir_(std::move(dir)), file_(std::move(file)) {
  listed_ = {file_, file_ + "-journal", file_ + "-wal", file_ + "-shm", file_ + "-reserve", dir_};
  for (const std::string& t : listed_) remove_on_fatal_signal(t);
}

PrivateTraceDir::~PrivateTraceDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  say_on_fatal_signal("");
  for (const std::string& t : listed_) keep_on_fatal_signal(t);
}

}  // namespace ingero::app
