// The user-space alternative to the in-kernel CPython walk, measured: reading a live
// python3.11 thread's frames through /proc/PID/mem the way BPF reads them (interpreter ->
// thread list, matched by native thread id -> current frame -> each frame's code object,
// instruction pointer and parent). Prints ns per walk and frames per walk as JSON.
//   py_walk_bench [PYTHON] [WALKS]      (root: reads another process's memory)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "probe/proc_maps.h"
#include "probe/python.h"

using namespace ingero::hal;

int main(int argc, char** argv) {
  std::string python = argc > 1 ? argv[1] : "/usr/bin/python3.11";
  int walks = argc > 2 ? std::atoi(argv[2]) : 20000;
  // Three Python frames deep (a -> b -> c, under <module>), spinning in c().
  int out[2];
  if (pipe(out) != 0) return 1;
  pid_t child = fork();
  if (child == 0) {
    dup2(out[1], 1);
    close(out[0]);
    execl(python.c_str(), python.c_str(), "-c",
          "import os, sys\n"
          "def c():\n"
          "    print('ready', flush=True)\n"
          "    x = 0\n"
          "    while True:\n"
          "        x += 1\n"
          "def b():\n"
          "    c()\n"
          "def a():\n"
          "    b()\n"
          "a()\n",
          (char*)nullptr);
    _exit(127);
  }
  close(out[1]);
  // Wait for the line that says the loop is running (reads may return it in pieces).
  std::string said;
  char ch;
  while (said.find("ready\n") == std::string::npos && read(out[0], &ch, 1) == 1) said += ch;
  if (said.find("ready\n") == std::string::npos) {
    std::fprintf(stderr, "py_walk_bench: %s did not start (it said \"%s\")\n", python.c_str(),
                 said.c_str());
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return 1;
  }
  auto stop = [&] {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  };
  std::ifstream mf("/proc/" + std::to_string(child) + "/maps");
  std::stringstream ss;
  ss << mf.rdbuf();
  auto p = PythonProcess::inspect(child, parse_proc_maps(ss.str()));
  if (!p || !*p) {
    std::fprintf(stderr, "py_walk_bench: %s\n",
                 p ? "not a Python process" : p.error().message.c_str());
    stop();
    return 1;
  }
  const PyLayout& l = (*p)->layout();
  if (l.cframe_current_frame == kNoOffset || l.thread_id_is_pthread) {
    std::fprintf(stderr, "py_walk_bench: this benchmark walks 3.11/3.12 frames\n");
    stop();
    return 1;
  }
  ProcessMemory mem(child);
  uint64_t runtime = (*p)->runtime();
  uint64_t frames_total = 0, failed = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < walks; ++i) {
    auto interp = mem.u64(runtime + l.runtime_interp_head);
    auto ts = interp ? mem.u64(*interp + l.interp_threads_head) : std::nullopt;
    // The thread making the call: matched by its native id, as BPF does.
    while (ts && *ts) {
      auto tid = mem.u64(*ts + l.tstate_thread_id);
      if (tid && uint32_t(*tid) == uint32_t(child)) break;
      ts = mem.u64(*ts + l.tstate_next);
    }
    if (!ts || !*ts) {
      ++failed;
      continue;
    }
    auto cframe = mem.u64(*ts + l.tstate_frame);
    auto frame = cframe ? mem.u64(*cframe + l.cframe_current_frame) : std::nullopt;
    for (int depth = 0; frame && *frame && depth < INGERO_PY_MAX; ++depth) {
      auto code = mem.u64(*frame + l.frame_code);
      auto instr = mem.u64(*frame + l.frame_instr);
      if (!code || !instr) break;
      ++frames_total;
      frame = mem.u64(*frame + l.frame_previous);
    }
  }
  double ns = double(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  stop();
  std::printf(
      "{\"walks\": %d, \"ns_per_walk\": %.0f, \"frames_per_walk\": %.2f, \"failed\": %llu}\n",
      walks, ns / walks, double(frames_total) / walks, (unsigned long long)failed);
  return 0;
}
