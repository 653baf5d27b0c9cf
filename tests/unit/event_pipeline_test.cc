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
  std::vector<hal::EventKind> kinds;
  Status on_event(const hal::Event& e) override {
    kinds.push_back(e.kind);
    return {};
  }
  Status on_process(uint32_t pid, std::string_view name, std::string_view, int64_t) override {
    names[pid] = std::string(name);
    return {};
  }
};

// A traced thread lost its CPU to another process: both are named, and only the traced one's
// maps are read (the stack collector snapshots a process it is shown). On a busy host every
// short-lived process that preempts a traced thread would otherwise cost a read of its maps.
TEST(EventPipeline, APreemptorIsNamedButItsMapsAreNotRead) {
  auto peer = test::Subprocess::spawn({"/bin/sleep", "30"});
  uint32_t own = uint32_t(getpid()), other = uint32_t(peer.pid());
  hal::ProbeTable table;
  hal::CallDecoder decoder(table);
  ProcessSink sink;
  StackCollector stacks(sink, nullptr);
  EventPipeline pipeline(decoder, sink);
  pipeline.read_proc = false;
  pipeline.stacks = &stacks;
  ingero_sched_rec r{};
  r.type = INGERO_REC_SCHED;
  r.pid = r.tid = own;
  r.start_ns = 1000;
  r.end_ns = 2000;
  r.preempted = 1;
  r.by_pid = r.by_tid = other;
  std::strcpy(r.comm, "train");
  std::strcpy(r.by_comm, "noisy");
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

}  // namespace
}  // namespace ingero::capture
