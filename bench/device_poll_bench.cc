// The device side channel's cost: the poll thread's CPU time over wall time (a share of one
// core) at the poll period, and the event loop's cost of writing what it read to a trace file
// and the Prometheus registry. A rate, not a timed test: bench/device_poll_cost.sh runs it over
// the stand-in libnvidia-ml.so.1 and a fake amdgpu tree.
//
//   device_poll_bench NVML_LIBRARY SYSFS_ROOT PROCFS_ROOT SECONDS POLL_MS DB [PIDS...]
// With INGERO_BENCH_SAMPLER_EXE (the ingero binary), NVML runs in a process of its own as the
// tracer runs it (hal/sampler_process.h), and the poll's CPU counts that process's too.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "app/device_poller.h"
#include "backends/amdgpu/amdgpu_backend.h"
#include "backends/nvml/nvml_backend.h"
#include "capture/sink_set.h"
#include "serve/metrics/metrics.h"
#include "store/trace_writer.h"

using namespace ingero;

static int64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 7) {
    std::cerr << "usage: device_poll_bench NVML_LIBRARY SYSFS_ROOT PROCFS_ROOT SECONDS POLL_MS DB "
                 "[PIDS...]\n";
    return 2;
  }
  hal::DeviceSamplerOptions o;
  o.nvml_library = argv[1];
  o.sysfs_root = argv[2];
  o.procfs_root = argv[3];
  double seconds = atof(argv[4]);
  o.poll_ns = int64_t(atof(argv[5]) * 1e6);
  std::vector<uint32_t> pids;
  for (int i = 7; i < argc; ++i) pids.push_back(uint32_t(atoi(argv[i])));
  const char* exe = getenv("INGERO_BENCH_SAMPLER_EXE");
  auto nvml = backends::make_nvml_backend(argv[1], exe ? exe : "");
  auto amd = backends::make_amdgpu_backend();
  app::DevicePoller poller({nvml.get(), amd.get()}, o);
  for (const auto& n : poller.notes()) std::cerr << "note: " << n << "\n";
  if (!poller.active()) {
    std::cerr << "no device sampler opened\n";
    return 1;
  }
  auto writer = store::TraceWriter::open(argv[6]);
  if (!writer) {
    std::cerr << writer.error().message << "\n";
    return 1;
  }
  store::SessionInfo si;
  si.node = "bench";
  (void)(*writer)->begin_session(si);
  serve::Metrics metrics(true);
  app::ProcessLabeller labels;
  metrics.set_process_labels([&](uint32_t pid) { return labels.of(pid); });
  capture::SinkSet sinks({writer->get(), &metrics});
  poller.set_gpu_pids(pids);
  int64_t wall0 = clock_ns(CLOCK_MONOTONIC);
  poller.start();
  int64_t record_cpu = 0;
  size_t samples = 0, rows = 0;
  // NVML's own process: its CPU once started and opened (the first polls answered), so that
  // its start (an exec, the loader, nvmlInit) is told apart from what each poll costs.
  int64_t started_cpu = -1;
  uint64_t started_polls = 0;
  // The event loop's share: drain and write every 200 ms, as the tracer does at --flush-ms.
  while (clock_ns(CLOCK_MONOTONIC) - wall0 < int64_t(seconds * 1e9)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    auto batch = poller.take();
    if (started_cpu < 0 && poller.polls() >= 2) {
      started_cpu = poller.process_cpu_ns();
      started_polls = poller.polls();
    }
    samples += batch.samples.size();
    if (auto st = app::record_device_batch(batch, sinks); !st) {
      std::cerr << st.error().message << "\n";
      return 1;
    }
    rows += batch.samples.size() + batch.events.size();
    record_cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    // Not counted: the tracer commits its batch every --flush-ms whether or not device rows are
    // in it.
    (void)(*writer)->commit();
  }
  double wall = double(clock_ns(CLOCK_MONOTONIC) - wall0);
  uint64_t polls = poller.polls();
  poller.stop();
  int64_t process_cpu = poller.process_cpu_ns();
  int64_t poll_cpu = poller.thread_cpu_ns() + process_cpu;
  std::printf(
      "{\"polls\": %llu, \"polls_per_s\": %.2f, \"samples\": %zu, \"poll_cpu_us_per_poll\": "
      "%.1f, \"process_cpu_us_per_poll\": %.1f, \"process_start_cpu_ms\": %.1f, "
      "\"process_steady_cpu_us_per_poll\": %.1f, \"poll_core_share_pct\": %.4f, "
      "\"record_us_per_row\": %.2f, \"record_core_share_pct\": %.4f}\n",
      (unsigned long long)polls, double(polls) / (wall / 1e9), samples,
      polls ? double(poll_cpu) / 1e3 / double(polls) : 0.0,
      polls ? double(process_cpu) / 1e3 / double(polls) : 0.0,
      started_cpu > 0 ? double(started_cpu) / 1e6 : 0.0,
      started_cpu > 0 && polls > started_polls
          ? double(process_cpu - started_cpu) / 1e3 / double(polls - started_polls)
          : 0.0,
      100.0 * double(poll_cpu) / wall, rows ? double(record_cpu) / 1e3 / double(rows) : 0.0,
      100.0 * double(record_cpu) / wall);
  return 0;
}
