// A long, realistic trace for the explain-at-scale benchmark (bench/explain_scale.sh), written
// through the same TraceWriter as `ingero trace`.
//
// Two data-parallel training processes (python3 train.py --rank 0/1), each a loop of steps:
// the batch goes up (2 host-to-device copies from the data-loader site), 330 kernel launches
// with ~20 us of Python between them (8 call sites of the model's forward and backward), the
// loss comes down (a device-to-host copy that waits for the GPU) and a stream sync. Per-op
// latencies are log-normal around what an H100 shows; the main thread goes off-CPU while it
// waits for the GPU (a sched_switch row naming its waker), and on-CPU samples arrive at 49 Hz.
// About 59,000 calls per second in all, close to a launch-bound ResNet-18 on an H100.
//
// The planted fault: from 60% to 75% of the steps, rank 1's DataLoader starves: before each
// batch goes up its main thread spends 40 ms on-CPU in SlowDS.__getitem__ (train.py:15),
// reached from next(dl) (train.py:35). explain must name it at every scale.
//
//   trace_gen OUT.db EVENTS [--no-fault] [--as-traced] [--threads N]
// Prints one JSON line: events written, steps, the fault's wall-clock window, seconds taken.
// --as-traced: written as `ingero trace` writes with its defaults: blocks folded as they close
// and folded for good 10 minutes on (--full-rows 10m; app/trace_periodic.cc), and one launch in
// 32 timed (--launch-timing 32), so the file is the one a trace leaves.
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "store/trace_writer.h"

using namespace ingero;

namespace {

constexpr uint64_t kStream = 0x7f3a'1c00'0000;
constexpr int kLaunchesPerStep = 330;
constexpr int kLaunchSites = 8;
constexpr uint64_t kFaultOnCpuNs = 40'000'000;

struct Gen {
  std::unique_ptr<store::TraceWriter> w;
  std::mt19937_64 rng{20261123};
  uint64_t events = 0;
  // As `ingero trace --launch-timing N` records launches: one in N timed through its return,
  // the others with their start only (0: every launch timed).
  uint64_t launch_timing = 0, launch_seq = 0;
  // --threads N: each rank's launches come from N threads in turn, and each step one of them
  // is preempted (a process of thousands of threads: explain's step model once took a pass over
  // every call for each preempted thread).
  uint32_t threads = 1;
  uint64_t thread_seq = 0;
  uint32_t launch_tid(uint32_t pid) {
    if (threads <= 1) return pid;
    return 100'000 + (pid - 5000) * 50'000 + uint32_t(thread_seq++ % threads);
  }

  // Log-normal around `median_ns` with shape `sigma`.
  uint64_t lat(double median_ns, double sigma) {
    std::lognormal_distribution<double> d(std::log(median_ns), sigma);
    return uint64_t(d(rng));
  }
  void add(const hal::Event& e) {
    if (auto st = w->add(e); !st) {
      std::fprintf(stderr, "trace_gen: %s\n", st.error().message.c_str());
      std::exit(1);
    }
    if (++events % 20000 == 0) (void)w->commit();
  }
  // An event of the training thread `pid` (its only thread here).
  static hal::Event event(uint32_t pid, uint64_t ts, uint64_t dur, const char* vendor,
                          const char* api, const char* op, hal::EventKind kind, uint64_t stack) {
    hal::Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = e.tid = pid;
    e.set_comm("python3");
    e.vendor = vendor;
    e.api = api;
    e.op = op;
    e.kind = kind;
    e.stack_id = stack;
    return e;
  }
  hal::Event call(uint32_t pid, uint64_t ts, uint64_t dur, const char* op, hal::EventKind kind,
                  uint64_t stack) {
    hal::Event e = event(pid, ts, dur, "nvidia", "cuda_runtime", op, kind, stack);
    e.has_ret = true;
    e.set(hal::Field::kStream, kStream);
    return e;
  }
  void host(uint32_t pid, uint64_t ts, uint64_t dur, const char* op, hal::EventKind kind,
            uint64_t stack = 0) {
    hal::Event e = event(pid, ts, dur, "host", "kernel", op, kind, stack);
    if (kind == hal::EventKind::kSchedSwitch) {
      e.set(hal::Field::kFlags, 0);  // not preempted: the thread went to sleep
      e.set(hal::Field::kState, 1);  // TASK_INTERRUPTIBLE
      // Woken from the idle task's interrupt (the GPU's completion), on CPU 10 us later: the
      // wakeup is on the interval, as ingero stores it.
      e.set(hal::Field::kWakerPid, 0);
      e.set(hal::Field::kWakerTid, 0);
      e.set(hal::Field::kRunqNs, 10'000);
      e.detail = "swapper/3";
    }
    add(e);
  }
};

hal::StackFrame py(const char* fn, const char* file, int line) {
  hal::StackFrame f;
  f.python = true;
  f.function = fn;
  f.file = file;
  f.line = line;
  return f;
}

// Stack ids: launch sites 1..8, the batch upload, the loss read, the slow dataset.
constexpr uint64_t kUploadStack = 100, kLossStack = 101, kSlowDsStack = 102;

void write_stacks(store::TraceWriter& w) {
  const char* layers[kLaunchSites] = {"conv1",  "layer1", "layer2",   "layer3",
                                      "layer4", "fc",     "backward", "step"};
  for (int i = 0; i < kLaunchSites; ++i) {
    std::vector<hal::StackFrame> f = {py("forward", "torch/nn/modules/conv.py", 456 + i),
                                      py(layers[i], "torchvision/models/resnet.py", 100 + i * 7),
                                      py("train_step", "train.py", 38),
                                      py("<module>", "train.py", 52)};
    (void)w.add_stack(uint64_t(i + 1), f);
  }
  (void)w.add_stack(kUploadStack, {py("to", "train.py", 36), py("<module>", "train.py", 35)});
  (void)w.add_stack(kLossStack, {py("train_step", "train.py", 41), py("<module>", "train.py", 52)});
  (void)w.add_stack(
      kSlowDsStack,
      {py("__getitem__", "train.py", 15), py("fetch", "torch/utils/data/_utils/fetch.py", 52),
       py("__next__", "torch/utils/data/dataloader.py", 631), py("<module>", "train.py", 35)});
}

// One step of one rank starting at `t`; returns its end.
uint64_t step(Gen& g, uint32_t pid, uint64_t t, bool starved) {
  using K = hal::EventKind;
  if (starved) {
    for (uint64_t s = 0; s < kFaultOnCpuNs; s += 20'408'163)  // 49 Hz
      g.host(pid, t + s + 1000, 0, "cpu_sample", K::kCpuSample, kSlowDsStack);
    t += kFaultOnCpuNs;
  }
  for (int i = 0; i < 2; ++i) {
    hal::Event c = g.call(pid, t, g.lat(30'000, 0.3), "cudaMemcpyAsync", K::kMemcpy, kUploadStack);
    c.set(hal::Field::kBytes, 128 * 3 * 64 * 64 * 4);
    c.set(hal::Field::kDirection, 1);  // H2D
    g.add(c);
    t += c.dur_ns + g.lat(15'000, 0.2);
  }
  for (int i = 0; i < kLaunchesPerStep; ++i) {
    uint64_t dur = g.lat(5'000, 0.4);
    hal::Event c = g.call(pid, t, dur, "cudaLaunchKernel", K::kLaunch,
                          uint64_t(1 + i * kLaunchSites / kLaunchesPerStep));
    c.set(hal::Field::kFunc, 0x7f3a'0000'1000 + uint64_t(i % 97) * 0x140);
    c.set(hal::Field::kGridX, 64 + uint64_t(i % 13));
    c.set(hal::Field::kBlockX, 256);
    c.tid = g.launch_tid(pid);
    if (g.launch_timing && g.launch_seq++ % g.launch_timing != 0) {
      c.timed = false;
      c.has_ret = false;
      c.dur_ns = 0;
    }
    g.add(c);
    if (i % 120 == 7) g.host(pid, t + 1000, 0, "cpu_sample", K::kCpuSample, c.stack_id);
    if (g.threads > 1 && i == kLaunchesPerStep / 2) {  // this thread loses the CPU for 40 us
      hal::Event sw = Gen::event(pid, t + dur + 1000, 40'000, "host", "kernel", "sched_switch",
                                 K::kSchedSwitch, 0);
      sw.tid = c.tid;
      sw.set(hal::Field::kFlags, 1);  // preempted
      sw.set(hal::Field::kState, 0);  // runnable
      sw.set(hal::Field::kPeerPid, 9999);
      sw.set_peer_comm("noisy");
      g.add(sw);
    }
    t += dur + g.lat(20'000, 0.25);
  }
  // The loss comes down once the GPU has drained: the host waits ~3 ms, off-CPU.
  uint64_t wait = g.lat(3'000'000, 0.15);
  hal::Event d2h = g.call(pid, t, wait, "cudaMemcpyAsync", K::kMemcpy, kLossStack);
  d2h.set(hal::Field::kBytes, 4);
  d2h.set(hal::Field::kDirection, 2);  // D2H
  d2h.off_cpu_ns = wait - 20'000;
  d2h.switches = 1;
  g.add(d2h);
  g.host(pid, t + 10'000, wait - 20'000, "sched_switch", K::kSchedSwitch);
  t += wait + g.lat(8'000, 0.2);
  hal::Event sync =
      g.call(pid, t, g.lat(9'000, 0.3), "cudaStreamSynchronize", K::kSync, kLossStack);
  g.add(sync);
  return t + sync.dur_ns + g.lat(60'000, 0.3);
}

}  // namespace

// What `ingero trace` does every 0.5 s with its defaults (app/trace_periodic.cc): the blocks
// whose calls all ended more than 10 minutes ago keep only their folded form.
// The longest single pass, and the time all passes took (the writer's pauses).
struct Upkeep {
  double archive_max_ms = 0, total_s = 0;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

constexpr int64_t kFullRows = int64_t(600) * 1'000'000'000;  // --full-rows' default

bool upkeep(store::TraceWriter& w, int64_t now, bool, Upkeep& u) {
  auto t0 = std::chrono::steady_clock::now();
  auto f = w.fold_blocks(now - kFullRows);
  u.archive_max_ms = std::max(u.archive_max_ms, ms_since(t0));
  u.total_s += ms_since(t0) / 1000;
  if (!f) {
    std::fprintf(stderr, "trace_gen: folding: %s\n", f.error().message.c_str());
    return false;
  }
  return true;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: trace_gen OUT.db EVENTS [--no-fault] [--as-traced] [--threads N]\n");
    return 2;
  }
  std::string out = argv[1];
  uint64_t target = std::stoull(argv[2]);
  bool fault = true, as_traced = false;
  uint32_t threads = 1;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--no-fault")
      fault = false;
    else if (a == "--as-traced")
      as_traced = true;
    else if (a == "--threads" && i + 1 < argc)
      threads = uint32_t(std::max(1, std::min(40'000, std::atoi(argv[++i]))));
    else {
      std::fprintf(stderr, "trace_gen: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  for (const char* s : {"", "-wal", "-shm", "-reserve"}) std::filesystem::remove(out + s);
  auto t0 = std::chrono::steady_clock::now();
  Gen g;
  g.threads = threads;
  auto w = store::TraceWriter::open(out);
  if (!w) {
    std::fprintf(stderr, "trace_gen: %s\n", w.error().message.c_str());
    return 1;
  }
  g.w = std::move(*w);
  if (as_traced) {  // as `ingero trace` writes with its defaults
    g.w->set_folding(true);
    g.w->set_block_span(kFullRows / 8);
    g.launch_timing = 32;
  }
  store::SessionInfo si;
  si.node = "gen-node";
  si.mono_offset_ns = 1'795'392'000'000'000'000;  // 2026-11-23 00:00 UTC at monotonic 0
  if (!g.w->begin_session(si)) return 1;
  write_stacks(*g.w);
  const uint32_t pids[2] = {5000, 5001};
  for (uint32_t pid : pids)
    (void)g.w->note_process(pid, "python3", "python3 train.py --rank " + std::to_string(pid - 5000),
                            0);
  // ~340 events per step and rank.
  uint64_t steps = std::max<uint64_t>(20, target / (2 * 341));
  uint64_t fault_from = steps * 60 / 100, fault_to = steps * 75 / 100;
  uint64_t t[2] = {1'000'000'000, 1'000'150'000}, done[2] = {0, 0};
  int64_t fault_start = 0, fault_end = 0;
  uint64_t next_tick = t[0] + 500'000'000;
  Upkeep up;
  // The rank whose clock is behind writes its next step: the file is written in time order
  // give or take a step, as a tracer writes it. (Written a step of each in turn, the starved
  // rank's calls, which fall behind by 88 s, were written beside the other's of 88 s later:
  // blocks of calls then spanned 88 s, and a read decoded each several times.)
  while (g.events < target && (done[0] < steps || done[1] < steps)) {
    int r = done[1] < steps && (done[0] >= steps || t[1] < t[0]) ? 1 : 0;
    if (as_traced && t[r] >= next_tick) {
      next_tick = t[r] + 500'000'000;
      if (!upkeep(*g.w, g.w->to_wall(t[r]), false, up)) return 1;
    }
    bool starved = fault && r == 1 && done[r] >= fault_from && done[r] < fault_to;
    if (starved && !fault_start) fault_start = g.w->to_wall(t[r]);
    t[r] = step(g, pids[r], t[r], starved);
    if (starved) fault_end = g.w->to_wall(t[r]);
    ++done[r];
  }
  // The tracer's last pass, at the session's end (app/trace_periodic.cc).
  if (as_traced && !upkeep(*g.w, g.w->to_wall(std::max(t[0], t[1])), true, up)) return 1;
  store::SessionEnd end;
  end.exit_reason = "generated";
  if (auto st = g.w->finish(end); !st) {
    std::fprintf(stderr, "trace_gen: %s\n", st.error().message.c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "{\"events\": %llu, \"steps_per_rank\": %llu, \"fault\": %s, \"fault_from_ns\": %lld, "
      "\"fault_to_ns\": %lld, \"seconds\": %.1f, \"bytes\": %llu, \"upkeep_s\": %.1f, "
      "\"archive_pass_max_ms\": %.1f}\n",
      (unsigned long long)g.events, (unsigned long long)steps, fault ? "true" : "false",
      (long long)fault_start, (long long)fault_end, secs,
      (unsigned long long)std::filesystem::file_size(out), up.total_s, up.archive_max_ms);
  return 0;
}
