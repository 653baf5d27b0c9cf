#include "backends/nvml/crash_note.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <string>

namespace ingero::backends::nvml {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
struct sigaction g_before[std::size(kSignals)];
char g_message[512];  // written before the handlers are set, read only by them
size_t g_length = 0;
thread_local volatile sig_atomic_t t_inside = 0;
volatile sig_atomic_t g_silent = 0;

void on_crash(int sig) {
  if (t_inside && !g_silent) {
    ssize_t ignored = write(STDERR_FILENO, g_message, g_length);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

CrashNote::CrashNote(const std::string& library, const char* call) {
  std::string m = "ingero: " + library + " crashed inside " + call +
                  " (a broken NVIDIA driver library): `ingero check` shows it, and "
                  "--device-poll-ms 0 traces without it\n";
  g_length = std::min(m.size(), sizeof(g_message));
  memcpy(g_message, m.data(), g_length);
  struct sigaction sa {};
  sa.sa_handler = on_crash;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &sa, &g_before[i]);
}

CrashNote::~CrashNote() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &g_before[i], nullptr);
}

void CrashNote::silence() { g_silent = 1; }

CrashNote::Inside::Inside() { t_inside = 1; }
CrashNote::Inside::~Inside() { t_inside = 0; }

}  // namespace ingero::backends::nvml
