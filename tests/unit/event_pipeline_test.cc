// The event pipeline's bookkeeping of processes, without BPF: which processes it names and
// which it shows the stack collector, from host records built here.
#include "capture/event_pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "capture/stack_collector.h"
#include "probe/record_decoder.h"
#include "probe/record_layout.h"
#include "tests/support/subprocess.h"

namespace ingero::capture {
namespace {

struct ProcessSink final : hal::EventSink {
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, int> named;  // times each pid was named
  std::vector<hal::EventKind> kinds;
  Status on_event(const hal::Event& e) override {
    kinds.push_back(e.kind);
    return {};
  }
  Status on_process(uint32_t pid, std::string_view name, std::string_view, int64_t) override {
    names[pid] = std::string(name);
    ++named[pid];
    return {};
  }
};

// A pipeline over no probes, reading nothing of /proc, with what it names kept.
struct Piped {
  hal::ProbeTable table;
  hal::CallDecoder decoder{table};
  ProcessSink sink;
  EventPipeline pipeline{decoder, sink};
  Piped() { pipeline.read_proc = false; }
};

class PipelineNaming : public ::testing::Test {
 protected:
  Piped p;
  ProcessSink& sink = p.sink;
  EventPipeline& pipeline = p.pipeline;
};

ingero_sched_rec preempted(uint32_t pid, uint32_t by, const char* comm, const char* by_comm) {
  ingero_sched_rec r{};
  r.type = INGERO_REC_SCHED;
  r.pid = r.tid = pid;
  r.start_ns = 1000;
  r.end_ns = 2000;
  r.preempted = 1;
  r.by_pid = r.by_tid = by;
  std::strncpy(r.comm, comm, sizeof(r.comm) - 1);
  std::strncpy(r.by_comm, by_comm, sizeof(r.by_comm) - 1);
  return r;
}

// A traced thread lost its CPU to another process: both are named, and only the traced one's
// maps are read (the stack collector snapshots a process it is shown). On a busy host every
// short-lived process that preempts a traced thread would otherwise cost a read of its maps.
TEST_F(PipelineNaming, APreemptorIsNamedButItsMapsAreNotRead) {
  auto peer = test::Subprocess::spawn({"/bin/sleep", "30"});
  uint32_t own = uint32_t(getpid()), other = uint32_t(peer.pid());
  StackCollector stacks(sink, nullptr);
  pipeline.stacks = &stacks;
  auto r = preempted(own, other, "train", "noisy");
  pipeline.on_record(&r, sizeof(r));
  pipeline.on_record(&r, sizeof(r));  // seen again: nothing new
  EXPECT_EQ(sink.names, (std::map<uint32_t, std::string>{{own, "train"}, {other, "noisy"}}));
  EXPECT_EQ(sink.kinds.size(), 2u);
  EXPECT_FALSE(stacks.maps_of(own).empty());
  EXPECT_TRUE(stacks.maps_of(other).empty());
  // The same process making a host event of its own is shown then, once.
  ingero_sched_rec s = r;
  s.pid = s.tid = other;
  s.by_pid = s.by_tid = own;
  pipeline.on_record(&s, sizeof(s));
  EXPECT_FALSE(stacks.maps_of(other).empty());
  EXPECT_EQ(sink.names.size(), 2u);
  peer.signal(SIGKILL);
  peer.wait();
}

// An agent left on for days on a busy host sees every pid the kernel hands out: what it
// remembers of them is bounded, and past the bound a pid is named again.
TEST_F(PipelineNaming, ThePidsItRemembersAreBounded) {
  auto r = preempted(7, 100000, "train", "short");
  pipeline.on_record(&r, sizeof(r));
  pipeline.on_record(&r, sizeof(r));
  EXPECT_EQ(sink.named[100000], 1);
  for (uint32_t by = 100001; by < 100000 + 65535; ++by) {
    r.by_pid = r.by_tid = by;
    pipeline.on_record(&r, sizeof(r));
  }
  EXPECT_EQ(sink.names.size(), 65536u);  // 7 and 65,535 peers: at the bound, none forgotten
  r.by_pid = r.by_tid = 100000;
  pipeline.on_record(&r, sizeof(r));
  EXPECT_EQ(sink.named[100000], 1);
  r.by_pid = r.by_tid = 200000;  // one more: the others are forgotten
  pipeline.on_record(&r, sizeof(r));
  r.by_pid = r.by_tid = 100000;
  pipeline.on_record(&r, sizeof(r));
  EXPECT_EQ(sink.named[100000], 2);
  EXPECT_EQ(sink.named[200000], 1);
}

// A traced process exits and the kernel gives its pid to another: the new one is named.
TEST_F(PipelineNaming, APidReusedAfterAnExitIsNamedAgain) {
  auto r = preempted(7, 8, "train", "noisy");
  pipeline.on_record(&r, sizeof(r));
  ingero_proc_rec e{};
  e.type = INGERO_REC_PROC;
  e.kind = INGERO_PROC_EXIT;
  e.pid = e.tid = 7;
  std::strcpy(e.comm, "train");
  pipeline.on_record(&e, sizeof(e));
  pipeline.end_cycle();  // kept for a cycle: its last calls may still be queued
  pipeline.on_record(&r, sizeof(r));
  EXPECT_EQ(sink.named[7], 1);
  pipeline.end_cycle();
  auto again = preempted(7, 8, "eval", "noisy");
  pipeline.on_record(&again, sizeof(again));
  EXPECT_EQ(sink.named[7], 2);
  EXPECT_EQ(sink.names[7], "eval");
  EXPECT_EQ(sink.named[8], 1);
}

}  // namespace
}  // namespace ingero::capture
