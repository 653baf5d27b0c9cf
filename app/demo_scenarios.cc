#include "app/demo_scenarios.h"

#include <cstring>
#include <random>

#include "hal/demangle.h"

namespace ingero::app {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;

constexpr uint64_t kMs = 1'000'000, kUs = 1'000, kS = 1'000'000'000;
constexpr uint64_t kT0 = 1'000 * kS;  // synthetic monotonic start

// Small builder over the writer: events in the vocabulary the tracer produces.
class Demo {
 public:
  explicit Demo(store::TraceWriter& w) : w_(w), rng_(20261122) {}

  Event call(uint32_t pid, uint32_t tid, const char* comm, std::string_view api,
             std::string_view op, EventKind kind, uint64_t ts, uint64_t dur) {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = pid;
    e.tid = tid;
    e.set_comm(comm);
    e.vendor = api == "hip" || api == "rccl" ? "amd" : "nvidia";
    e.api = api;
    e.op = op;
    e.kind = kind;
    e.has_ret = true;
    e.cgroup_id = 1000;
    e.library = api == "cuda_runtime" ? "/usr/local/cuda/lib64/libcudart.so.13 (synthetic)"
                : api == "nccl"       ? "/usr/lib/libnccl.so.2 (synthetic)"
                                      : "";
    return e;
  }
  // The call lost the CPU for `off` to by_pid; `foreign`: the preemptor is in another cgroup.
  void preempted(Event& e, uint64_t off, uint32_t by_pid, const char* by_comm, uint32_t n = 1,
                 bool foreign = false) {
    e.off_cpu_ns = off;
    e.preempts = n;
    e.switches = n;
    e.set(Field::kPeerPid, by_pid);
    e.set(Field::kPeerTid, by_pid);
    e.set_peer_comm(by_comm);
    sched(e.pid, e.tid, e.comm_view(), e.ts_ns + e.dur_ns / 4, off, by_pid, by_comm, true,
          foreign ? 2000 : 1000);
  }
  void sched(uint32_t pid, uint32_t tid, std::string_view comm, uint64_t start, uint64_t off,
             uint32_t by_pid, const char* by_comm, bool preempt, uint64_t by_cgroup = 1000) {
    Event e;
    e.ts_ns = start;
    e.dur_ns = off;
    e.pid = pid;
    e.tid = tid;
    e.set_comm(comm);
    e.vendor = "host";
    e.api = "kernel";
    e.kind = EventKind::kSchedSwitch;
    e.op = "sched_switch";
    e.cgroup_id = 1000;
    e.set(Field::kPeerPid, by_pid);
    e.set(Field::kPeerTid, by_pid);
    e.set(Field::kPeerCgroup, by_cgroup);
    e.set(Field::kFlags, preempt ? 1 : 0);
    e.set_peer_comm(by_comm);
    add(e);
  }
  void fork(uint32_t parent, uint32_t child, const char* comm, uint64_t ts) {
    Event e;
    e.ts_ns = ts;
    e.pid = parent;
    e.tid = parent;
    e.set_comm("python3");
    e.vendor = "host";
    e.api = "kernel";
    e.kind = EventKind::kProcessFork;
    e.op = "process_fork";
    e.set(Field::kPeerPid, child);
    e.set(Field::kPeerTid, child);
    e.set_peer_comm(comm);
    add(e);
    (void)w_.note_process(child, comm, std::string("python3 -c worker (synthetic)"), 0);
  }
  void cgroup(uint64_t id, const char* path) { (void)w_.add_cgroup_path(id, path); }
  void proc(uint32_t pid, const char* name) { (void)w_.note_process(pid, name, "(synthetic)", 0); }
  void snapshot(uint64_t ts, double cpu, double mem) {
    (void)w_.add_snapshot({w_.to_wall(ts), cpu, mem, cpu / 25, 16000, 0, 4});
  }
  void stats(uint32_t pid, const char* comm, uint64_t ts, uint64_t switches, uint64_t off,
             uint64_t pages) {
    store::ProcessStatsRow r;
    r.ts_ns = w_.to_wall(ts);
    r.dur_ns = int64_t(5 * kS);
    r.pid = pid;
    r.comm = comm;
    r.switches = switches;
    r.involuntary = switches;
    r.off_cpu_ns = off;
    r.max_off_cpu_ns = off / std::max<uint64_t>(switches, 1) * 3;
    r.page_allocs = pages;
    r.page_bytes = pages * 4096;
    (void)w_.add_process_stats(r);
  }
  void add(const Event& e) { (void)w_.add(e); }
  ingero::Status naming(const engine::KernelNaming& n) { return w_.update_kernel_naming(n); }
  void stack(uint64_t id, std::vector<hal::StackFrame> frames) { (void)w_.add_stack(id, frames); }
  // A kernel's name as the tracer stores it (hal/kernel_names.h).
  void kernel(uint32_t pid, uint64_t func, const char* raw, hal::KernelNameSource source) {
    (void)w_.add_kernel_name({pid, func, hal::demangle(raw), raw, source, kT0});
  }
  uint64_t jitter(uint64_t base, double spread) {
    std::uniform_real_distribution<double> d(1.0 - spread, 1.0 + spread);
    return uint64_t(double(base) * d(rng_));
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  // A python3 training loop's loss read on stream 0: a 4-byte device-to-host copy at
  // `copy_at`, its sync at `sync_at`, both from `stack`, both returning `ret`.
  void loss_read(uint32_t pid, uint64_t stack, uint64_t copy_at, uint64_t copy_ns, uint64_t sync_at,
                 uint64_t sync_ns, int64_t ret = 0) {
    Event c = call(pid, pid, "python3", "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy,
                   copy_at, copy_ns);
    c.set(Field::kBytes, 4);
    c.set(Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
    c.set(Field::kStream, 0);
    c.stack_id = stack;
    c.ret = ret;
    add(c);
    Event s = call(pid, pid, "python3", "cuda_runtime", "cudaStreamSynchronize", EventKind::kSync,
                   sync_at, sync_ns);
    s.set(Field::kStream, 0);
    s.stack_id = stack;
    s.ret = ret;
    add(s);
  }

 private:
  store::TraceWriter& w_;
  std::mt19937_64 rng_;
};

// A training step: launches, an H2D copy, a sync.
void step(Demo& d, uint32_t pid, uint64_t t, int launches = 20) {
  for (int k = 0; k < launches; ++k) {
    Event e = d.call(pid, pid, "python3", "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch,
                     t + uint64_t(k) * 40 * kUs, d.jitter(8 * kUs, 0.3));
    e.set(Field::kGridX, 256);
    e.set(Field::kBlockX, 128);
    e.set(Field::kStream, 0x5151);
    d.add(e);
  }
  Event c = d.call(pid, pid, "python3", "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy,
                   t + 900 * kUs, d.jitter(30 * kUs, 0.2));
  c.set(Field::kBytes, 4 << 20);
  c.set(Field::kDirection, 1);
  d.add(c);
}

void incident(Demo& d) {
  const uint32_t kTrainer = 4242, kHog = 4411;
  d.proc(kTrainer, "python3");
  d.proc(kHog, "noisy_neighbor");
  d.cgroup(1000, "/kubepods/burstable/pod-trainer");
  d.cgroup(2000, "/system.slice/batch-reindex.service");
  for (uint64_t s = 0; s < 60; ++s)
    d.snapshot(kT0 + s * kS, s >= 20 && s < 40 ? 100.0 : 35.0, 41.0);
  for (uint64_t i = 0; i < 3000; ++i) {  // 50 steps/s for 60 s
    uint64_t t = kT0 + i * 20 * kMs;
    step(d, kTrainer, t);
    bool contended = t >= kT0 + 20 * kS && t < kT0 + 40 * kS;
    uint64_t dur = d.jitter(410 * kUs, 0.15);
    Event s = d.call(kTrainer, kTrainer, "python3", "cuda_runtime", "cudaStreamSynchronize",
                     EventKind::kSync, t + 1 * kMs, dur);
    s.set(Field::kStream, 0x5151);
    if (contended && d.chance(0.4)) {
      uint64_t off = d.jitter(4500 * kUs, 0.5);
      s.dur_ns += off;
      d.preempted(s, off, kHog, "noisy_neighbor", 1, true);
    }
    d.add(s);
  }
}

void dataloader(Demo& d) {
  const uint32_t kMain = 2233;
  const uint32_t kWorkers[] = {2255, 2256, 2257, 2258};
  d.proc(kMain, "python3");
  uint64_t t0 = kT0;
  for (uint32_t w : kWorkers) d.fork(kMain, w, "pt_data_worker", t0 + 100 * kMs);
  for (uint64_t s = 0; s < 40; ++s) {
    d.snapshot(t0 + s * kS, 100.0, 71.0);
    if (s % 5 == 0) {
      d.stats(kMain, "python3", t0 + s * kS, 200, 900 * kMs, 100000);
      for (uint32_t w : kWorkers) d.stats(w, "pt_data_worker", t0 + s * kS, 6000, 2 * kS, 11000);
    }
  }
  for (uint64_t i = 0; i < 130; ++i) {  // ~3 batches/s
    uint64_t t = t0 + 200 * kMs + i * 300 * kMs;
    uint32_t by = kWorkers[i % 4];
    Event c = d.call(kMain, kMain, "python3", "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy,
                     t, d.jitter(1 * kMs, 0.3));
    c.set(Field::kBytes, 400 << 20);
    c.set(Field::kDirection, 1);
    if (d.chance(0.6)) {
      uint64_t off = d.jitter(180 * kMs, 0.6);
      c.dur_ns += off;
      d.preempted(c, off, by, "pt_data_worker", 12);
    }
    d.add(c);
    for (int k = 0; k < 6; ++k) {
      Event l =
          d.call(kMain, kMain, "python3", "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch,
                 t + c.dur_ns + uint64_t(k) * 100 * kUs, d.jitter(70 * kUs, 0.2));
      if (d.chance(0.03)) {
        uint64_t off = d.jitter(20 * kMs, 0.5);
        l.dur_ns += off;
        d.preempted(l, off, by, "pt_data_worker");
      }
      d.add(l);
    }
    Event s = d.call(kMain, kMain, "python3", "cuda_runtime", "cudaStreamSynchronize",
                     EventKind::kSync, t + c.dur_ns + 2 * kMs, d.jitter(25 * kUs, 0.2));
    d.add(s);
  }
}

void hidden_sync(Demo& d) {
  const uint32_t kPid = 7001;
  d.proc(kPid, "python3");
  for (uint64_t s = 0; s < 30; ++s) d.snapshot(kT0 + s * kS, 45.0, 30.0);
  uint64_t t = kT0;
  for (int it = 0; it < 60; ++it) {  // forward passes
    for (int k = 0; k < 12; ++k) {
      d.add(d.call(kPid, kPid, "python3", "cuda_runtime", "cudaLaunchKernel", EventKind::kLaunch, t,
                   9 * kUs));
      t += 15 * kUs;
    }
    // window_masking(): B x 2 .cpu().numpy() round-trips, B = 64.
    for (int b = 0; b < 128; ++b) {
      Event c = d.call(kPid, kPid, "python3", "cuda_runtime", "cudaMemcpyAsync", EventKind::kMemcpy,
                       t, d.jitter(40 * kUs, 0.2));
      c.set(Field::kBytes, 256);
      c.set(Field::kDirection, 2);
      d.add(c);
      t += c.dur_ns + 5 * kUs;
      Event s = d.call(kPid, kPid, "python3", "cuda_runtime", "cudaStreamSynchronize",
                       EventKind::kSync, t, d.jitter(1800 * kUs, 0.3));
      d.add(s);
      t += s.dur_ns + 20 * kUs;
    }
  }
}

void graph_recapture(Demo& d) {
  const uint32_t kPid = 8100, kHog = 8200;
  d.proc(kPid, "python3");
  d.proc(kHog, "logrotate");
  for (uint64_t s = 0; s < 60; ++s)
    d.snapshot(kT0 + s * kS, s >= 30 && s < 36 ? 100.0 : 50.0, 40.0);
  auto graph_op = [&](std::string_view op, EventKind k, uint64_t t, uint64_t dur, uint64_t exec) {
    Event e = d.call(kPid, kPid, "python3", "cuda_runtime", op, k, t, dur);
    if (exec) e.set(Field::kGraphExec, exec);
    d.add(e);
  };
  uint64_t exec = 0x7000;
  graph_op("cudaStreamBeginCapture", EventKind::kGraphBeginCapture, kT0, 20 * kUs, 0);
  graph_op("cudaStreamEndCapture", EventKind::kGraphEndCapture, kT0 + 5 * kMs, 30 * kUs, 0);
  graph_op("cudaGraphInstantiate", EventKind::kGraphInstantiate, kT0 + 6 * kMs, 4 * kMs, exec);
  uint64_t t = kT0 + 20 * kMs;
  while (t < kT0 + 60 * kS) {
    bool storm = t >= kT0 + 30 * kS && t < kT0 + 36 * kS;
    if (storm && d.chance(0.5)) {
      ++exec;  // new batch size: capture again
      graph_op("cudaStreamBeginCapture", EventKind::kGraphBeginCapture, t, 20 * kUs, 0);
      graph_op("cudaStreamEndCapture", EventKind::kGraphEndCapture, t + 30 * kMs, 40 * kUs, 0);
      graph_op("cudaGraphInstantiate", EventKind::kGraphInstantiate, t + 31 * kMs, 50 * kMs, exec);
      t += 90 * kMs;
      continue;
    }
    Event l = d.call(kPid, kPid, "python3", "cuda_runtime", "cudaGraphLaunch",
                     EventKind::kGraphLaunch, t, d.jitter(10 * kUs, 0.2));
    l.set(Field::kGraphExec, exec);
    if (storm) {
      uint64_t off = d.jitter(300 * kMs, 0.3);
      l.dur_ns += off;
      d.preempted(l, off, kHog, "logrotate", 40);
    }
    d.add(l);
    t += storm ? 400 * kMs : 6 * kMs;
  }
}

void nccl_straggler(Demo& d) {
  const uint32_t kBase = 5000;
  const int kRanks = 8, kStraggler = 5;
  const uint64_t kCommunicatorHash = 0x9e3779b97f4a7c15ull;
  for (int r = 0; r < kRanks; ++r) {
    d.proc(kBase + uint32_t(r), "torchrun-rank");
    Event init = d.call(kBase + uint32_t(r), kBase + uint32_t(r), "python3", "nccl",
                        "ncclCommInitRank", EventKind::kCommInit, kT0, 80 * kMs);
    init.set(Field::kRank, uint64_t(r));
    init.set(Field::kNranks, kRanks);
    init.set(Field::kCommHash, kCommunicatorHash);
    init.set(Field::kCommunicator, 0xc0000 + uint64_t(r));
    d.add(init);
  }
  for (uint64_t s = 0; s < 40; ++s) d.snapshot(kT0 + s * kS, 60.0, 50.0);
  for (int i = 0; i < 100; ++i) {
    uint64_t t = kT0 + kS + uint64_t(i) * 400 * kMs;
    uint64_t late = d.jitter(290 * kMs, 0.2);
    uint64_t done = t + late + d.jitter(20 * kMs, 0.2);  // everyone finishes once rank 5 arrives
    for (int r = 0; r < kRanks; ++r) {
      uint64_t enter = t + (r == kStraggler ? late : d.jitter(2 * kMs, 0.8));
      uint32_t pid = kBase + uint32_t(r);
      Event c = d.call(pid, pid, "python3", "nccl", "ncclAllReduce", EventKind::kCollective, enter,
                       done - enter);
      c.set(Field::kCount, 1 << 20);
      c.set(Field::kDatatype, 7);
      c.set(Field::kBytes, 4 << 20);
      c.set(Field::kReduceOp, 0);
      c.set(Field::kCommunicator, 0xc0000 + uint64_t(r));
      c.set(Field::kCommHash, kCommunicatorHash);
      c.set(Field::kRank, uint64_t(r));
      c.set(Field::kNranks, kRanks);
      c.set(Field::kStream, 0x5000 + uint64_t(r));
      d.add(c);
      // The host waits for the collective in the next stream sync (the barrier).
      Event sync = d.call(pid, pid, "python3", "cuda_runtime", "cudaStreamSynchronize",
                          EventKind::kSync, done, r == kStraggler ? 2 * kMs : 20 * kMs);
      sync.set(Field::kStream, 0x5000 + uint64_t(r));
      d.add(sync);
      if (r == kStraggler && i % 3 == 0)
        d.sched(pid, pid, "python3", t + 10 * kMs, 120 * kMs, 5100, "ckpt_writer", true);
    }
  }
  d.proc(5100, "ckpt_writer");
}

// A launch-bound step: 400 tiny `mul` and 400 `add` kernels a step from one line of Python,
// then the loss read from another; the kernels named as the tracer names them, 8 launches a
// step of a function registered before the trace began (no name).
// A frame of the demos' training script, /home/user/train.py.
hal::StackFrame py(const char* fn, int64_t line) {
  hal::StackFrame f;
  f.python = true;
  f.function = fn;
  f.file = "/home/user/train.py";
  f.line = line;
  return f;
}

void launch_bound(Demo& d) {
  const uint32_t kPid = 5151;
  const uint64_t kStepStack = 0x51, kLossStack = 0x52;
  const uint64_t kMul = 0x55d0c0a01e40, kAdd = 0x55d0c0a01f10, kOld = 0x55d0c0a02000;
  d.proc(kPid, "python3");
  d.stack(kStepStack,
          {py("tiny_step", 8), py("train_epoch", 21), py("main", 30), py("<module>", 34)});
  d.stack(kLossStack, {py("train_epoch", 23), py("main", 30), py("<module>", 34)});
  d.kernel(kPid, kMul, "_Z3mulPfPKfS1_i", hal::KernelNameSource::kRegistration);
  d.kernel(kPid, kAdd, "_Z3addPfPKfS1_i", hal::KernelNameSource::kRegistration);
  for (uint64_t s = 0; s < 2; ++s) d.snapshot(kT0 + s * kS, 55.0, 30.0);
  for (uint64_t i = 0; i < 120; ++i) {  // ~4.2 ms steps
    uint64_t t = kT0 + i * 4200 * kUs;
    for (int k = 0; k < 808; ++k) {
      Event e = d.call(kPid, kPid, "python3", "cuda_runtime", "cudaLaunchKernel",
                       EventKind::kLaunch, t + uint64_t(k) * 5 * kUs, d.jitter(3500, 0.2));
      e.set(Field::kFunc, k >= 800 ? kOld : k % 2 ? kAdd : kMul);
      e.set(Field::kGridX, 64);
      e.set(Field::kBlockX, 256);
      e.set(Field::kStream, 0);
      e.stack_id = kStepStack;
      e.stack_of_site = true;
      d.add(e);
    }
    uint64_t copy = d.jitter(8 * kUs, 0.2), sync = d.jitter(20 * kUs, 0.2);
    d.loss_read(kPid, kLossStack, t + 4060 * kUs, copy, t + 4070 * kUs, sync);
  }
  (void)d.naming({2, 120 * 8, 1, 0, 0});
}

// A kernel indexes past its input at step 150: the step's loss read (a D2H copy) returns
// cudaErrorIllegalAddress, and so does every call after it until the program gives up.
void device_fault(Demo& d) {
  const uint32_t kPid = 7373;
  const uint64_t kStepStack = 0x71, kLossStack = 0x72;
  const uint64_t kEmbed = 0x55d0c0b01000, kGather = 0x55d0c0b01100, kLoss = 0x55d0c0b01200;
  d.proc(kPid, "python3");
  d.stack(kStepStack, {py("forward", 41), py("train_step", 77), py("<module>", 90)});
  d.stack(kLossStack, {py("train_step", 80), py("<module>", 90)});
  d.kernel(kPid, kEmbed, "_Z9embed_fwdPKfPKlPfi", hal::KernelNameSource::kRegistration);
  d.kernel(kPid, kGather, "_Z11gather_rowsIfEvPKT_PKlPS0_i", hal::KernelNameSource::kRegistration);
  d.kernel(kPid, kLoss, "_Z8mse_lossPKfS0_Pfi", hal::KernelNameSource::kRegistration);
  for (uint64_t s = 0; s < 3; ++s) d.snapshot(kT0 + s * kS, 40.0, 30.0);
  const uint64_t kFault = 150;
  for (uint64_t i = 0; i < kFault + 4; ++i) {  // 12 ms steps
    uint64_t t = kT0 + i * 12 * kMs;
    int64_t ret = i >= kFault ? 700 : 0;
    for (int k = 0; k < 12; ++k) {
      Event e = d.call(kPid, kPid, "python3", "cuda_runtime", "cudaLaunchKernel",
                       EventKind::kLaunch, t + uint64_t(k) * 200 * kUs, d.jitter(6 * kUs, 0.2));
      e.set(Field::kFunc, k < 4 ? kEmbed : k < 11 ? kGather : kLoss);
      e.set(Field::kStream, 0);
      e.stack_id = kStepStack;
      e.ret = i > kFault ? 700 : 0;  // the fault surfaces at step 150's loss read
      d.add(e);
    }
    uint64_t copy = d.jitter(30 * kUs, 0.2), sync = d.jitter(1500 * kUs, 0.1);
    d.loss_read(kPid, kLossStack, t + 10 * kMs, copy, t + 10 * kMs + 40 * kUs, sync, ret);
  }
}

}  // namespace

const std::vector<DemoScenario>& demo_scenarios() {
  static const std::vector<DemoScenario> s = {
      {"incident",
       "a training loop whose cudaStreamSynchronize tail explodes while a noisy neighbour preempts "
       "it"},
      {"dataloader-starvation",
       "DataLoader workers fighting the main process for CPU; H2D copies starve"},
      {"hidden-sync", "a .cpu().numpy() inside the forward pass: 128 host round-trips per step"},
      {"graph-recapture",
       "CUDA graph re-capture storm after a batch-size change, launch rate collapses"},
      {"nccl-straggler", "8 ranks all-reduce; rank 5 enters every collective ~290 ms late"},
      {"launch-bound",
       "400 tiny mul and 400 add kernels per step from one line: the host's launch rate sets "
       "the step time"},
      {"device-fault",
       "a kernel indexes out of bounds at step 150: cudaErrorIllegalAddress surfaces at the loss "
       "read, and every call after it fails"},
  };
  return s;
}

ingero::Status write_demo(const std::string& scenario, store::TraceWriter& w) {
  store::SessionInfo si;
  si.node = "demo";
  si.host = "synthetic";
  // Each scenario starts at its own hour: a trace file is named in a fleet by its node and start
  // (docs/fleet.md), and two scenarios shipped to one database were one file there, the second's
  // events never stored and "every row" said. Two files of one scenario are the same trace.
  int64_t index = 0;
  for (const auto& s : demo_scenarios()) {
    if (s.name == scenario) break;
    ++index;
  }
  si.started_at_ns = 1'775'000'000'000'000'000 + index * 3'600'000'000'000;
  si.mono_offset_ns = si.started_at_ns - int64_t(kT0);
  si.flags = "demo," + scenario + ",synthetic";
  if (auto s = w.begin_session(si); !s) return s.error();
  Demo d(w);
  if (scenario == "incident")
    incident(d);
  else if (scenario == "dataloader-starvation")
    dataloader(d);
  else if (scenario == "hidden-sync")
    hidden_sync(d);
  else if (scenario == "graph-recapture")
    graph_recapture(d);
  else if (scenario == "nccl-straggler")
    nccl_straggler(d);
  else if (scenario == "launch-bound")
    launch_bound(d);
  else if (scenario == "device-fault")
    device_fault(d);
  else {
    std::string known;
    for (const auto& s : demo_scenarios()) known += (known.empty() ? "" : ", ") + s.name;
    return ingero::make_error("unknown scenario '" + scenario + "' (known: " + known + ")");
  }
  return w.commit();
}

}  // namespace ingero::app
