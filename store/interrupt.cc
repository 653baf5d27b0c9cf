#include "store/interrupt.h"

#include <sqlite3.h>

#include <atomic>

namespace ingero::store {

namespace {

constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<sqlite3*> g_db{nullptr};
std::atomic<int> g_signal{0};

// sqlite3_interrupt only sets a flag the connection's statements check.
void on_signal(int sig) {
  g_signal.store(sig);
  if (sqlite3* db = g_db.load()) sqlite3_interrupt(db);
}

}  // namespace

InterruptOnSignal::InterruptOnSignal(Db& db) {
  g_db.store(db.handle());
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
}

InterruptOnSignal::~InterruptOnSignal() {
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  g_db.store(nullptr);
}

int InterruptOnSignal::signal() { return g_signal.load(); }

}  // namespace ingero::store
