// Batches of untimed launches (bpf/launch_batch.h) as user space reads them: the wire form
// walked launch by launch, a damaged batch refused, and the event pipeline turning one ring
// record into each of its launches, in order.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_driver_probes.h"
#include "capture/event_pipeline.h"
#include "hal/call_record.h"
#include "probe/record_decoder.h"
#include "probe/record_layout.h"

namespace ingero::hal {
namespace {

struct Sink final : EventSink {
  std::vector<Event> events;
  Status on_event(const Event& e) override {
    events.push_back(e);
    return {};
  }
};

class LaunchBatch : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = backends::make_cuda_backend();
    for (const auto& s : backends::cuda::kDriverProbes)
      if (s.symbol == "cuLaunchKernel")
        probe_ = table_.add(
            {cuda_.get(), &s, {"nvidia", "cuda_driver", 0, false}, "/lib/x.so", "cuLaunchKernel"});
  }
  // An untimed launch as launch_at_entry writes it; the first of its thread carries its name.
  std::vector<uint8_t> launch(uint64_t start, bool ident) const {
    CallRecord r;
    r.hdr.type = INGERO_REC_CALL;
    r.hdr.probe_id = probe_;
    r.hdr.pid = 50;
    r.hdr.tid = 51;
    r.hdr.start_ns = start;
    r.hdr.nregs = INGERO_REG_WORDS;
    r.hdr.nstack = 3;
    r.hdr.flags = INGERO_CALL_ENTRY_ONLY | INGERO_CALL_CALLER | (ident ? INGERO_CALL_IDENT : 0);
    r.regs[0] = start;  // the kernel's function: tells the launches apart
    r.caller = 0x7f0000001000;
    if (ident) std::strcpy(r.ident.comm, "trainer");
    return pack_launch(r);
  }
  std::vector<uint8_t> batch_of_three() const {
    return pack_launch_batch({launch(100, true), launch(200, false), launch(300, false)});
  }
  std::unique_ptr<VendorBackend> cuda_;
  ProbeTable table_;
  uint32_t probe_ = 0;
};

TEST_F(LaunchBatch, EachLaunchIsHandedOverWholeAndInOrder) {
  auto bytes = batch_of_three();
  std::vector<uint64_t> starts;
  std::vector<size_t> sizes;
  ASSERT_TRUE(for_each_batched_launch(bytes.data(), bytes.size(), [&](const void* d, size_t n) {
    CallRecord r;
    ASSERT_TRUE(unpack_call(d, n, r));
    starts.push_back(r.hdr.start_ns);
    sizes.push_back(n);
  }));
  EXPECT_EQ(starts, (std::vector<uint64_t>{100, 200, 300}));
  EXPECT_EQ(sizes, (std::vector<size_t>{launch(1, true).size(), launch(1, false).size(),
                                        launch(1, false).size()}));
  EXPECT_EQ(bytes.size(), sizeof(ingero_launch_batch_rec) + sizes[0] + sizes[1] + sizes[2]);
}

TEST_F(LaunchBatch, ADamagedBatchIsRefusedWithoutReadingPastIt) {
  auto good = batch_of_three();
  auto none = [](const void*, size_t) {};
  // Cut anywhere: shorter than its header says.
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(for_each_batched_launch(good.data(), n, none)) << n;
  auto with = [&](size_t at, uint32_t v) {
    auto b = good;
    std::memcpy(b.data() + at, &v, sizeof(v));
    return b;
  };
  const size_t count = offsetof(ingero_launch_batch_rec, count);
  const size_t first_size = sizeof(ingero_launch_batch_rec) + offsetof(ingero_launch_rec, size);
  int handed = 0;
  auto counting = [&](const void*, size_t) { ++handed; };
  // More launches said than it holds: the three are handed over, then it is refused.
  auto b = with(count, 4);
  EXPECT_FALSE(for_each_batched_launch(b.data(), b.size(), counting));
  EXPECT_EQ(handed, 3);
  // A launch shorter than a launch header, or running past the batch.
  for (uint32_t bad : {0u, 8u, uint32_t(good.size())}) {
    b = with(first_size, bad);
    handed = 0;
    EXPECT_FALSE(for_each_batched_launch(b.data(), b.size(), counting)) << bad;
    EXPECT_EQ(handed, 0) << bad;
  }
  // Another record type.
  b = with(0, INGERO_REC_LAUNCH);
  EXPECT_FALSE(for_each_batched_launch(b.data(), b.size(), none));
}

TEST_F(LaunchBatch, ThePipelineMakesOneEventOfEachLaunchAndCountsEachOnce) {
  CallDecoder decoder(table_);
  Sink sink;
  capture::EventPipeline pipeline(decoder, sink);
  pipeline.read_proc = false;
  int commits = 0;
  pipeline.batch_records = 4;  // counted in launches, not ring records
  pipeline.on_batch = [&] {
    ++commits;
    pipeline.commit();
  };
  auto bytes = batch_of_three();
  pipeline.on_record(bytes.data(), bytes.size());
  EXPECT_EQ(commits, 0);
  pipeline.on_record(bytes.data(), bytes.size());
  EXPECT_EQ(commits, 1);
  ASSERT_EQ(sink.events.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(sink.events[i].get(Field::kFunc), 100 * (i % 3 + 1)) << i;
    EXPECT_EQ(sink.events[i].op, "cuLaunchKernel");
    EXPECT_FALSE(sink.events[i].timed);
    EXPECT_EQ(sink.events[i].comm_view(), "trainer") << i;
  }
  const auto& c = pipeline.counters();
  EXPECT_EQ(c.call_records, 6u);
  EXPECT_EQ(c.calls, 6u);
  EXPECT_EQ(c.untimed, 6u);
  EXPECT_EQ(c.malformed, 0u);
  // A damaged batch: the launches before the damage are kept, the batch counted malformed once.
  auto damaged = bytes;
  uint32_t four = 4;
  std::memcpy(damaged.data() + offsetof(ingero_launch_batch_rec, count), &four, sizeof(four));
  pipeline.on_record(damaged.data(), damaged.size());
  EXPECT_EQ(sink.events.size(), 9u);
  EXPECT_EQ(pipeline.counters().malformed, 1u);
}

}  // namespace
}  // namespace ingero::hal
