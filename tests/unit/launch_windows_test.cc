// The schedule of launch timing windows (probe/launch_windows.h), without a kernel.
#include "probe/launch_windows.h"

#include <gtest/gtest.h>

#include <vector>

namespace ingero::hal {
namespace {

constexpr int64_t kMs = 1'000'000;

// What a file's windows do from its attach (window 1 open) over `ticks`, a launch first read at
// `first_ms`: "o@T" and "c@T" for each opening and closing, T in ms.
std::vector<std::string> run(const WindowPlan& p, int64_t first_ms, std::vector<int64_t> ticks) {
  WindowState s;
  s.window = 1;
  std::vector<std::string> out;
  for (int64_t t : ticks) {
    if (t >= first_ms) window_first_launch(s, t * kMs, p);
    switch (window_step(s, t * kMs, p)) {
      case WindowStep::kOpen:
        out.push_back("o@" + std::to_string(t));
        s.window = next_window(s.window);
        break;
      case WindowStep::kClose:
        out.push_back("c@" + std::to_string(t));
        s.window = next_window(s.window);
        break;
      case WindowStep::kNone:
        break;
    }
  }
  return out;
}

std::vector<int64_t> every_100ms(int64_t to_ms) {
  std::vector<int64_t> t;
  for (int64_t m = 0; m <= to_ms; m += 100) t.push_back(m);
  return t;
}

TEST(LaunchWindowSchedule, TheFirstWindowLastsUntilAWindowAfterTheFirstLaunch) {
  WindowPlan p{1000 * kMs, 4000 * kMs};
  // Launches from 2.5 s on: the first window closes at 3.5 s, then 1 s open in every 4 s.
  EXPECT_EQ(run(p, 2500, every_100ms(12000)),
            (std::vector<std::string>{"c@3500", "o@6500", "c@7500", "o@10500", "c@11500"}));
  // No launch read: the window never closes (a launch-free file costs nothing).
  EXPECT_EQ(run(p, 1'000'000, every_100ms(12000)), std::vector<std::string>{});
}

TEST(LaunchWindowSchedule, NoPeriodMeansNoWindows) {
  EXPECT_EQ(run(WindowPlan{1000 * kMs, 0}, 0, every_100ms(5000)), std::vector<std::string>{});
}

TEST(LaunchWindowSchedule, ALateTickMovesTheScheduleNotTheWindowsLength) {
  WindowPlan p{100 * kMs, 400 * kMs};
  // The reader was away from 200 to 900 ms: the close comes late, the next opening 300 ms later.
  EXPECT_EQ(run(p, 0, {0, 100, 900, 1000, 1100, 1200, 1300, 1400}),
            (std::vector<std::string>{"c@100", "o@900", "c@1000", "o@1300", "c@1400"}));
}

TEST(LaunchWindowSchedule, WindowsAreOddWhileOpenAndNeverZeroOpen) {
  EXPECT_EQ(next_window(0), 1);
  EXPECT_EQ(next_window(1), 2);
  EXPECT_EQ(next_window(65534), 65535);
  EXPECT_EQ(next_window(65535), 2);  // closed; 0 is the probes never windowed
  WindowState s;
  s.window = 65535;
  EXPECT_TRUE(s.open());
  s.window = next_window(s.window);
  EXPECT_FALSE(s.open());
}

}  // namespace
}  // namespace ingero::hal
