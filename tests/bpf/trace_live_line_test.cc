// The live line on a terminal, read through a pseudo-terminal as a user's shell would show it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Runs argv on a terminal `cols` wide; everything it wrote there, until it exits.
std::string on_terminal(const std::vector<std::string>& argv, unsigned short cols) {
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = cols;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  EXPECT_GT(pid, 0);
  std::string out;
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{master, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(master, buf, sizeof buf);
    if (n <= 0) break;  // EIO: the terminal's last writer is gone
    out.append(buf, size_t(n));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(master);
  return out;
}

// The rows the terminal shows: split at newlines (the terminal writes each as \r\n), each row
// as its last redraw left it.
std::vector<std::string> rows_of(std::string out) {
  for (size_t at; (at = out.find("\r\n")) != std::string::npos;) out.erase(at, 1);
  std::vector<std::string> rows;
  std::string row;
  for (char c : out) {
    if (c == '\n') {
      rows.push_back(row);
      row.clear();
    } else if (c == '\r') {
      row.clear();
    } else {
      row += c;
    }
  }
  if (!row.empty()) rows.push_back(row);
  return rows;
}

// A traced command writes to the same terminal: its lines stay its own. The line redrawn in
// place left "... probes 177epoch 2: loss=0.2" (a hostile tester's training loop).
TEST(LiveLine, ACommandsOutputNeverLandsOnTheLiveLine) {
  REQUIRE_BPF();
  const std::string db = temp_path("live-cmd.db");
  auto out = on_terminal({INGERO_BIN, "trace", "--db", db, "--", "/bin/sh", "-c",
                          "sleep 1.5; echo epoch 1; sleep 1.2; echo epoch 2"},
                         200);
  int epochs = 0;
  for (const auto& r : rows_of(out)) {
    if (r.find("epoch") == std::string::npos) continue;
    ++epochs;
    EXPECT_EQ(r.rfind("epoch ", 0), 0u) << "[" << r << "]\n" << out;
  }
  EXPECT_EQ(epochs, 2) << out;
}

// A terminal narrower than the line: it is cut to one row, which a redraw clears whole (a line
// that wrapped left a row behind each second).
TEST(LiveLine, TheLineFitsANarrowTerminal) {
  REQUIRE_BPF();
  const std::string db = temp_path("live-narrow.db");
  auto out = on_terminal({INGERO_BIN, "trace", "--db", db, "--duration", "3s"}, 40);
  // Every redraw, not only the last of each row.
  int live = 0;
  std::string seg;
  for (size_t i = 0; i <= out.size(); ++i) {
    if (i < out.size() && out[i] != '\r' && out[i] != '\n') {
      seg += out[i];
      continue;
    }
    if (seg.rfind("\033[K", 0) == 0) seg.erase(0, 3);
    if (seg.rfind("ingero: ", 0) == 0 && seg.find("  calls ") != std::string::npos) {
      ++live;
      EXPECT_LE(seg.size(), 39u) << "[" << seg << "]";
    }
    seg.clear();
  }
  EXPECT_GE(live, 2) << out;
}

}  // namespace
}  // namespace ingero::test
