// A trace from start to end: open the file, attach, read until the session ends, finish
// (app/trace_session.h); and the entry `ingero trace` calls.
#include <chrono>
#include <cstdlib>
#include <thread>

#include "app/commands.h"
#include "app/trace_session.h"
#include "app/trace_signals.h"
#include "app/tracer.h"
#include "hal/memory.h"

namespace ingero::app {
namespace trace_detail {

int Trace::run() {
  install_signal_handlers();
  if (int rc = open(); rc != kExitOk) {
    cmd_.kill_and_reap();
    return rc;
  }
  // Test-only: INGERO_TEST_ATTACH_PAUSE_MS holds the tracer between opening its file (the
  // command forked, waiting for its release) and attaching the probes, so that a test can
  // signal it, or end the waiting command, at a known point of its start.
  if (const char* pause = getenv("INGERO_TEST_ATTACH_PAUSE_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(atoll(pause)));
  if (int rc = attach(); rc != kExitOk) {
    cmd_.kill_and_reap();
    return rc;
  }
  loop();
  return finish();
}

}  // namespace trace_detail

int run_trace(const TraceOptions& opts, const hal::BackendRegistry& registry) {
  // A long-running agent: memory freed goes back to the system. By default glibc raises its
  // mmap threshold after each large free, so the next large blocks come from the heap and stay
  // there once freed; the session's analysis then peaked at 77 MiB instead of 63 over 3.2 M
  // calls (docs/performance.md).
  hal::return_freed_memory();
  trace_detail::Trace t(opts, registry);
  return t.run();
}

}  // namespace ingero::app
