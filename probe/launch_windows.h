// Launch timing windows, for kernels without uprobe sessions (before 6.12).
//
// With sessions a launch's entry decides whether its return traps: one launch in
// --launch-timing per thread is timed, the others cost one trap. Without sessions a return
// probe traps at every call of its function, whatever the entry program decides, so a launch
// whose return probe is attached costs two traps. ProbeManager therefore attaches a file's launch
// probes at entry, and their return probes only during a timing window: from the attach until
// a second after the file's first launch is read, then for a second in every N (N =
// --launch-timing). In a window a thread times its launches at most one per 4 µs
// (INGERO_WINDOW_TIMING_GAP_NS), outside one none; the others go out at their entry, untimed. ~1 + 1/N traps a launch in all,
// about as with sessions.
//
// The BPF side (bpf/call_paths.h) knows a window by its launch recipes' `window` field: odd
// while the return probes are attached. A window opens by attaching them, then counting the
// field up; it closes by counting it up, then closing them. A frame pushed in a window that has
// since closed lost its return with it: it goes out untimed at its thread's next call, and the
// in-flight reader skips it.
#pragma once

#include <cstdint>
#include <limits>

namespace ingero::hal {

struct WindowPlan {
  int64_t window_ns = 1'000'000'000;  // how long a window stays open
  int64_t period_ns = 0;              // from one opening to the next; 0: no windows
};

// One file's windows.
struct WindowState {
  uint16_t window = 0;          // its launch recipes' window: odd while open
  int64_t first_launch_ns = 0;  // when its first launch was read; 0: not yet
  int64_t next_ns = std::numeric_limits<int64_t>::max();  // the next opening or closing
  bool open() const { return window & 1; }
};

enum class WindowStep { kNone, kOpen, kClose };

// How long a closed window's return probes stay (ProbeManager::close_window).
constexpr int64_t kReturnGraceNs = 100'000'000;

// The file's first launch was read at `now`: an open window closes a window's length later.
inline void window_first_launch(WindowState& s, int64_t now, const WindowPlan& p) {
  if (s.first_launch_ns) return;
  s.first_launch_ns = now ? now : 1;
  if (s.open()) s.next_ns = now + p.window_ns;
}

// What is due at `now`; next_ns moves to the step after it. The caller does it, then counts
// `window` up (an opening that fails leaves it closed until the next period).
inline WindowStep window_step(WindowState& s, int64_t now, const WindowPlan& p) {
  if (!p.period_ns || now < s.next_ns) return WindowStep::kNone;
  if (s.open()) {
    s.next_ns = now + (p.period_ns > p.window_ns ? p.period_ns - p.window_ns : p.window_ns);
    return WindowStep::kClose;
  }
  s.next_ns = now + p.window_ns;
  return WindowStep::kOpen;
}

// The window after `w` (0 stays unused once counting starts: frames of window 0 are not timed
// in a window).
inline uint16_t next_window(uint16_t w) { return uint16_t(w + 1) ? uint16_t(w + 1) : 2; }

}  // namespace ingero::hal
