// What the OTLP exporter's tests share (otlp_export_test.cc, otlp_delivery_test.cc): the
// configuration and fast options they run with, a registry fed with every kind of series, a
// causal chain, and the receiver's records and metrics picked apart.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "serve/metrics/metrics.h"
#include "serve/otlp/exporter.h"
#include "tests/support/otlp_receiver.h"
#include "tests/support/sink_inputs.h"

namespace ingero::serve::otlp::fixture {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace pm = opentelemetry::proto::metrics::v1;
namespace pl = opentelemetry::proto::logs::v1;
namespace pt = opentelemetry::proto::trace::v1;
namespace pc = opentelemetry::proto::common::v1;

inline ExporterConfig config_for(const std::string& url,
                                 std::map<std::string, std::string> vars = {}) {
  auto c = resolve_config(url, [vars](const char* n) -> std::optional<std::string> {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
  EXPECT_TRUE(c) << (c ? "" : c.error().message);
  return c ? *c : ExporterConfig{};
}

inline ExporterOptions fast_options() {
  ExporterOptions o;
  o.interval = 100ms;
  o.flush = 50ms;
  o.start_ns = 1'700'000'000'000'000'000;
  o.node = "gpu-07";
  o.resource = {{"service.name", "ingero"}, {"host.name", "gpu-07"}};
  o.delivery.initial_backoff = 20ms;
  o.delivery.max_backoff = 200ms;
  return o;
}

// test::call with the vendor its api belongs to, made by the process's second thread.
inline hal::Event call(std::string_view api, hal::EventKind kind, std::string_view op,
                       uint64_t dur_ns, int64_t ret = 0, uint32_t pid = 100) {
  hal::Event e = test::call(api == "hip" ? "amd" : "nvidia", api, kind, op, dur_ns, ret, pid);
  e.tid = pid + 1;
  return e;
}

inline void feed(Metrics& m) {
  using K = hal::EventKind;
  for (int i = 0; i < 5; ++i)
    m.observe(call("cuda_runtime", K::kLaunch, "cudaLaunchKernel", 4'000 + 1'000 * i));
  auto sync = call("cuda_runtime", K::kSync, "cudaStreamSynchronize", 2'345'678);
  sync.off_cpu_ns = 1'234'567;
  sync.preempts = 2;
  m.observe(sync);
  m.observe(call("hip", K::kMemcpy, "hipMemcpy", 30'001, 101));
  m.observe(call("hip", K::kMemcpy, "hipMemcpy", 70'003, 101));
  auto ar = call("nccl", K::kCollective, "ncclAllReduce", 50'000);
  ar.set(hal::Field::kBytes, 4096);
  m.observe(ar);
  hal::Event io;
  io.kind = K::kBlockIo;
  io.op = "read";
  io.dur_ns = 3'000'000;
  m.observe(io);
  EXPECT_TRUE(m.on_chains(test::chains_of({{"HIGH", 1}, {"LOW", 3}}), 0));
  EXPECT_TRUE(m.on_steps({{0.25, 0.5}, {0.125, 0.75}}));
  hal::SessionCounters lost;
  lost.call_drops = 7;
  EXPECT_TRUE(m.on_agent_stats(test::agent_stats(123, 45.5, lost, 2, {{"cuda", 40}}, 1 << 20)));
}

inline std::map<std::string, std::string> attrs(
    const google::protobuf::RepeatedPtrField<pc::KeyValue>& kv) {
  std::map<std::string, std::string> m;
  for (const auto& a : kv) m[a.key()] = a.value().string_value();
  return m;
}

inline const pm::Metric* find_metric(const pm::ScopeMetrics& sm, const std::string& name) {
  for (const auto& m : sm.metrics())
    if (m.name() == name) return &m;
  return nullptr;
}

inline engine::Chain chain(const std::string& rule, engine::Severity sev, uint32_t pid,
                           const std::string& op) {
  engine::Chain c = engine::new_chain(rule, "nvidia", "cuda_runtime", op, {pid, pid + 1},
                                      1'700'000'000'000'000'000, 1'700'000'005'000'000'000);
  c.id = rule + ":" + std::to_string(pid) + ":" + op;
  c.severity = sev;
  c.summary = op + " p99 is 12x p50 in train.py (pid " + std::to_string(pid) + ")";
  c.root_cause = "CPU contention";
  c.explanation = "The thread was preempted for 41% of the slow calls' time.";
  c.fixes = {"pin the training process", "move the noisy job"};
  c.timeline = {{"CUDA", op, "p99=5.1ms p50=410us", 5'100},
                {"HOST", "sched_switch", "preempted 1,203 times", 0}};
  c.p50_ns = 410'000;
  c.p99_ns = 5'100'000;
  c.tail_ratio = 12.4;
  engine::ChainStack cs;
  cs.frames = {"[Python] train.py:41 in step()", "[Python] train.py:90 in main()"};
  c.stacks = {cs};
  return c;
}

inline std::vector<pl::LogRecord> all_records(const test::OtlpReceiver& rx) {
  std::vector<pl::LogRecord> out;
  for (const auto& r : rx.logs())
    for (const auto& rl : r.resource_logs())
      for (const auto& sl : rl.scope_logs())
        for (const auto& lr : sl.log_records()) out.push_back(lr);
  return out;
}

inline std::map<std::string, pc::AnyValue> attr_values(const pl::LogRecord& r) {
  std::map<std::string, pc::AnyValue> m;
  for (const auto& a : r.attributes()) m[a.key()] = a.value();
  return m;
}

}  // namespace ingero::serve::otlp::fixture
