// The engine's rules through the replay path, for the rule tests: synthetic events written by
// the same TraceWriter the tracer uses, read back through the same TraceSource `explain` uses.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "engine/analysis.h"
#include "store/sql_trace_source.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"
#include "tests/support/trace_db.h"

namespace ingero::app {

using engine::Severity;
using hal::Event;
using hal::EventKind;
using hal::Field;

inline constexpr uint64_t kMs = 1'000'000, kUs = 1'000, kS = 1'000'000'000;

// Writes events, then analyses them.
class Replay {
 public:
  Replay() : path_(test::temp_path("replay.db")) {
    auto w = store::TraceWriter::open(path_);
    EXPECT_TRUE(w);
    w_ = std::move(*w);
    store::SessionInfo si;
    si.node = "test";
    si.mono_offset_ns = 1'700'000'000'000'000'000;
    EXPECT_TRUE(w_->begin_session(si));
  }
  Event call(uint32_t pid, std::string_view op, EventKind k, uint64_t ts, uint64_t dur,
             std::string_view api = "cuda_runtime") {
    Event e = test::runtime_call(ts, dur, pid, pid, k, op);
    e.vendor = api == "hip" ? "amd" : "nvidia";
    e.api = api;
    return e;
  }
  Event host(uint32_t pid, std::string_view op, EventKind k, uint64_t ts, uint64_t dur) {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = pid;
    e.tid = pid;
    e.set_comm("kworker");
    e.vendor = "host";
    e.api = "kernel";
    e.op = op;
    e.kind = k;
    return e;
  }
  // An off-CPU interval of `pid` ("trainer") from `ts` for `dur`: preempted while `by` held
  // the CPU, or asleep (interruptible) and `by` ran next. No name for `by` 0.
  Event switched_out(uint32_t pid, uint64_t ts, uint64_t dur, bool preempted, uint32_t by,
                     std::string_view by_comm) {
    Event e = host(pid, "sched_switch", EventKind::kSchedSwitch, ts, dur);
    e.set_comm("trainer");
    e.set(Field::kFlags, preempted ? 1 : 0);
    e.set(Field::kState, preempted ? 0 : 1);
    e.set(Field::kPeerPid, by);
    if (by) e.set_peer_comm(by_comm);
    return e;
  }
  void add(const Event& e) { ASSERT_TRUE(w_->add(e)); }
  store::TraceWriter& writer() { return *w_; }
  engine::Analysis analyze() {
    EXPECT_TRUE(w_->finish({}));
    w_.reset();
    reader_ = std::move(*store::TraceReader::open(path_));
    source_ = std::make_unique<store::SqlTraceSource>(*reader_);
    return engine::analyze(*source_, engine::Window{});
  }
  // The trace as explain reads it, once analyze() has run.
  store::SqlTraceSource& source() { return *source_; }

 private:
  std::string path_;
  std::unique_ptr<store::TraceWriter> w_;
  std::unique_ptr<store::TraceReader> reader_;
  std::unique_ptr<store::SqlTraceSource> source_;
};

inline const engine::Chain* find(const engine::Analysis& a, const std::string& rule) {
  for (const auto& c : a.chains)
    if (c.rule == rule) return &c;
  return nullptr;
}
// `e` preempted once, `off_ns` of its time off-CPU, while `by` (`by_comm`) held the CPU.
inline void preempt(Event& e, uint64_t off_ns, uint32_t by, std::string_view by_comm) {
  e.off_cpu_ns = off_ns;
  e.switches = e.preempts = 1;
  e.set(Field::kPeerPid, by);
  e.set_peer_comm(by_comm);
}

}  // namespace ingero::app
