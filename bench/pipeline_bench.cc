// Pipeline throughput: synthetic ring-buffer call records through the same EventPipeline
// (decode -> SQLite batch writer) that `ingero trace` runs, pinned to one CPU.
// Prints events/s. Target (docs/performance.md): >= 500,000 events/s on one core.
//   pipeline_bench [N] [DB] [metrics|kernels|metrics+kernels]   "metrics": also update the
//   Prometheus registry per event; "kernels": name each launch's function (capture/kernel_namer.h)
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "capture/event_pipeline.h"
#include "capture/kernel_namer.h"
#include "capture/sink_set.h"
#include "store/trace_writer.h"
#include "serve/metrics/metrics.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "probe/record_layout.h"

using namespace ingero;

int main(int argc, char** argv) {
  size_t n = argc > 1 ? std::stoul(argv[1]) : 2'000'000;
  std::string db = argc > 2 ? argv[2] : "/tmp/ingero-pipeline-bench.db";
  std::filesystem::remove(db);
  std::filesystem::remove(db + "-wal");
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  sched_setaffinity(0, sizeof(set), &set);

  auto cuda = backends::make_cuda_backend();
  hal::ProbeTable table;
  std::vector<uint32_t> ids;
  for (const char* op : {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize",
                         "cudaMalloc", "cudaFree", "cudaLaunchKernel", "cudaLaunchKernel"}) {
    for (const auto& s : backends::cuda::kRuntimeProbes)
      if (s.symbol == op)
        ids.push_back(table.add({cuda.get(),
                                 &s,
                                 {"nvidia", "cuda_runtime", 0, false},
                                 "/usr/lib/libcudart.so.13",
                                 op}));
  }
  // A realistic mix: 8 threads of 2 processes, launch-heavy.
  // Records as the calls ring carries them (hal::pack_call), each thread's first call with
  // its name, as BPF ships it.
  std::vector<std::vector<uint8_t>> recs(65536);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < recs.size(); ++i) {
    hal::CallRecord c;
    auto& r = c.hdr;
    r.type = INGERO_REC_CALL;
    r.probe_id = ids[i % ids.size()];
    r.pid = 1000 + uint32_t(i % 2);
    r.tid = r.pid + uint32_t(i % 8);
    r.start_ns = 1'000'000'000 + i * 2000;
    r.end_ns = r.start_ns + 500 + rng() % 20000;
    r.nregs = 6;
    r.nstack = 2;
    c.regs[0] = 0x7f0000001000 + (i % 64) * 64;
    c.regs[1] = (uint64_t(4) << 32) | 128;
    c.regs[2] = 1;
    c.regs[3] = (uint64_t(1) << 32) | 256;
    c.regs[4] = 1;
    c.stack[0] = 0;
    c.stack[1] = 0x5151;
    r.return_len = 8;
    r.nested = 1;
    r.nested_probe = r.probe_id;
    if (i < 16) {
      r.flags |= INGERO_CALL_IDENT;
      std::strcpy(c.ident.comm, "python3");
    }
    recs[i] = hal::pack_call(c);
  }

  auto writer = store::TraceWriter::open(db);
  if (!writer) {
    std::fprintf(stderr, "%s\n", writer.error().message.c_str());
    return 1;
  }
  store::SessionInfo si;
  si.node = "bench";
  (void)(*writer)->begin_session(si);
  hal::CallDecoder decoder(table);
  std::string mode = argc > 3 ? argv[3] : "";
  bool with_metrics = mode == "metrics" || mode == "metrics+kernels";
  bool with_kernels = mode == "kernels" || mode == "metrics+kernels";
  serve::Metrics metrics(false);
  capture::SinkSet sinks({writer->get()});
  if (with_metrics) sinks.add(&metrics);
  capture::EventPipeline pipe(decoder, sinks);
  pipe.read_proc = false;
  capture::KernelNamer namer(sinks, std::make_unique<capture::LocalProcessImage>());
  if (with_kernels) pipe.kernels = &namer;

  auto t0 = std::chrono::steady_clock::now();
  auto next_commit = t0 + std::chrono::milliseconds(200);
  for (size_t i = 0; i < n; ++i) {
    auto& r = recs[i & (recs.size() - 1)];
    reinterpret_cast<ingero_call_rec*>(r.data())->start_ns += 1;  // distinct timestamps
    pipe.on_record(r.data(), r.size());
    if ((i & 4095) == 0 && std::chrono::steady_clock::now() >= next_commit) {
      pipe.commit();
      next_commit = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    }
  }
  pipe.commit();
  auto t1 = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(t1 - t0).count();
  store::SessionEnd end;
  (void)(*writer)->finish(end);  // rebuilds the time index once
  double finish_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  std::printf(
      "{\"events\": %zu, \"seconds\": %.3f, \"events_per_s\": %.0f, \"finish_seconds\": %.3f, "
      "\"stored\": %llu, \"store_errors\": %llu, \"db_bytes\": %llu, \"metrics\": %s, "
      "\"kernels\": %s}\n",
      n, secs, double(n) / secs, finish_s, (unsigned long long)(*writer)->written(),
      (unsigned long long)sinks.errors(), (unsigned long long)std::filesystem::file_size(db),
      with_metrics ? "true" : "false", with_kernels ? "true" : "false");
  return sinks.errors() ? 1 : 0;
}
