// The sink seam (hal/event_sink.h, capture/sink_set.h): every kind a sink receives goes through
// the one SinkSet, to each sink once and in order; a sink that fails is reported and never
// keeps a kind from the others; the kinds a sink does not override are no-ops; and the real
// sinks (the trace writer, the Prometheus registry) keep each kind they get through the seam.
#include "capture/sink_set.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "serve/metrics/metrics.h"
#include "store/trace_writer.h"
#include "tests/support/exposition.h"
#include "tests/support/sink_inputs.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

// Records every kind it receives as "kind:payload".
class RecordingSink final : public hal::EventSink {
 public:
  std::vector<std::string> log;
  std::string fail_kind;  // this kind returns an error

  Status on_event(const hal::Event& ev) override { return put("event", std::string(ev.op)); }
  Status on_process(uint32_t pid, std::string_view name, std::string_view, int64_t) override {
    return put("process", std::to_string(pid) + "/" + std::string(name));
  }
  Status on_stack(uint64_t id, const std::vector<hal::StackFrame>& f) override {
    return put("stack", std::to_string(id) + "/" + std::to_string(f.size()));
  }
  Status on_inflight(const hal::InflightReport& r) override {
    return put("inflight", std::to_string(r.current.size()));
  }
  Status on_kernel_name(const hal::KernelName& k) override { return put("kernel_name", k.name); }
  Status commit() override { return put("commit", ""); }
  Status on_snapshot(const hal::HostSnapshot& s) override {
    return put("snapshot", std::to_string(s.procs_running));
  }
  Status on_process_stats(int64_t ts, int64_t dur,
                          const std::vector<hal::ProcessStats>& d) override {
    return put("process_stats",
               std::to_string(ts) + "+" + std::to_string(dur) + "/" + std::to_string(d.size()));
  }
  Status on_device_counters(int64_t ts, std::string_view backend,
                            const std::vector<hal::DevicePortSample>& p) override {
    return put("device_counters",
               std::to_string(ts) + "/" + std::string(backend) + "/" + std::to_string(p.size()));
  }
  Status on_device_samples(const std::vector<hal::DeviceSample>& s) override {
    return put("device_samples", std::to_string(s.size()));
  }
  Status on_device_events(const std::vector<hal::DeviceEvent>& e) override {
    return put("device_events", std::to_string(e.size()));
  }
  Status on_session_counters(const hal::SessionCounters& c, const hal::KernelNaming* n) override {
    return put("session_counters", std::to_string(c.call_drops) + "/" +
                                       (n ? std::to_string(n->unnamed_launches) : "none"));
  }
  Status on_agent_stats(const hal::AgentStats& a) override {
    return put("agent_stats", std::to_string(a.events_total));
  }
  Status on_tick(int64_t mono) override { return put("tick", std::to_string(mono)); }
  Status on_chains(const std::vector<engine::Chain>& c, int64_t now) override {
    return put("chains", std::to_string(c.size()) + "@" + std::to_string(now));
  }
  Status on_steps(const std::vector<hal::StepSample>& s) override {
    return put("steps", std::to_string(s.size()));
  }

 private:
  Status put(const std::string& kind, const std::string& payload) {
    log.push_back(kind + ":" + payload);
    if (kind == fail_kind) return Error{"cannot keep " + kind};
    return {};
  }
};

// Hands every kind of the seam to `s` once.
void hand_every_kind(hal::EventSink& s) {
  hal::Event ev;
  ev.op = "cudaLaunchKernel";
  hal::InflightReport inflight;
  inflight.current.resize(2);
  hal::KernelName k;
  k.name = "scale";
  hal::HostSnapshot snap;
  snap.procs_running = 3;
  hal::SessionCounters lost;
  lost.call_drops = 9;
  hal::KernelNaming naming;
  naming.unnamed_launches = 4;
  ASSERT_TRUE(s.on_event(ev));
  ASSERT_TRUE(s.on_process(42, "train", "python train.py", 1));
  ASSERT_TRUE(s.on_stack(7, std::vector<hal::StackFrame>(5)));
  ASSERT_TRUE(s.on_inflight(inflight));
  ASSERT_TRUE(s.on_kernel_name(k));
  ASSERT_TRUE(s.commit());
  ASSERT_TRUE(s.on_snapshot(snap));
  ASSERT_TRUE(s.on_process_stats(1000, 5000, std::vector<hal::ProcessStats>(2)));
  ASSERT_TRUE(s.on_device_counters(2000, "rdma", std::vector<hal::DevicePortSample>(3)));
  ASSERT_TRUE(s.on_device_samples(std::vector<hal::DeviceSample>(4)));
  ASSERT_TRUE(s.on_device_events(std::vector<hal::DeviceEvent>(1)));
  ASSERT_TRUE(s.on_session_counters(lost, &naming));
  ASSERT_TRUE(s.on_agent_stats(agent_stats(77, 0, {}, 0, {}, 0)));
  ASSERT_TRUE(s.on_tick(5'000'000'000));
  ASSERT_TRUE(s.on_chains(chains_of({{"HIGH", 2}}), 123));
  ASSERT_TRUE(s.on_steps(std::vector<hal::StepSample>(6)));
}

const std::vector<std::string> kEveryKind = {"event:cudaLaunchKernel",
                                             "process:42/train",
                                             "stack:7/5",
                                             "inflight:2",
                                             "kernel_name:scale",
                                             "commit:",
                                             "snapshot:3",
                                             "process_stats:1000+5000/2",
                                             "device_counters:2000/rdma/3",
                                             "device_samples:4",
                                             "device_events:1",
                                             "session_counters:9/4",
                                             "agent_stats:77",
                                             "tick:5000000000",
                                             "chains:2@123",
                                             "steps:6"};

TEST(SinkSet, EachSinkReceivesEveryKindExactlyOnceInOrder) {
  RecordingSink a, b;
  capture::SinkSet set({&a, &b});
  hand_every_kind(set);
  EXPECT_EQ(a.log, kEveryKind);
  EXPECT_EQ(b.log, kEveryKind);
  EXPECT_EQ(set.errors(), 0u);
}

TEST(SinkSet, AFailingSinkIsReportedOnceAndTheOthersStillReceiveTheKind) {
  RecordingSink a, b;
  a.fail_kind = "snapshot";
  capture::SinkSet set({&a, &b});
  std::vector<std::string> reported;
  set.on_error = [&](const std::string& m) { reported.push_back(m); };
  hal::HostSnapshot snap;
  snap.procs_running = 1;
  auto st = set.on_snapshot(snap);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "cannot keep snapshot");
  (void)set.on_snapshot(snap);
  EXPECT_EQ(b.log, (std::vector<std::string>{"snapshot:1", "snapshot:1"}));
  EXPECT_EQ(set.errors(), 2u);
  EXPECT_EQ(reported, (std::vector<std::string>{"cannot keep snapshot"}));  // once per message
  EXPECT_TRUE(set.on_steps({}));  // the next kind is not an error
}

// A sink that keeps only events: every other kind is a no-op that succeeds.
class EventsOnly final : public hal::EventSink {
 public:
  int events = 0;
  Status on_event(const hal::Event&) override {
    ++events;
    return {};
  }
};

TEST(SinkSet, KindsASinkDoesNotOverrideAreNoOps) {
  EventsOnly e;
  RecordingSink r;
  capture::SinkSet set({&e, &r});
  hand_every_kind(set);
  EXPECT_EQ(e.events, 1);
  EXPECT_EQ(r.log, kEveryKind);
  EXPECT_EQ(set.errors(), 0u);
}

hal::DevicePortSample port(uint64_t rcv_errors) {
  hal::DevicePortSample p;
  p.device = "mlx5_0";
  p.port = 1;
  p.attributes = {{"transport", "InfiniBand", true}};
  hal::CounterSample c;
  c.counter = c.metric = "port_rcv_errors";
  c.help = "Received packets with errors";
  c.value = rcv_errors;
  c.unit = "packets";
  c.is_error = true;
  p.counters = {c};
  return p;
}

// The tracer's wiring: the writer and the registry behind one SinkSet, fed only through it.
TEST(SinkSet, WriterAndMetricsKeepTheSampledKindsTheyGetThroughTheSeam) {
  std::string db = temp_path("sink_seam.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w) << w.error().message;
  ASSERT_TRUE((*w)->begin_session({}));
  serve::Metrics m(false);
  capture::SinkSet set({w->get(), &m});

  hal::HostSnapshot snap{1'700'000'000'000'000'000, 12.5, 40.0, 1.5, 2048, 16, 3};
  ASSERT_TRUE(set.on_snapshot(snap));
  hal::ProcessStats p1, p2;
  p1.pid = 100;
  p1.comm = "train";
  p1.page_allocs = 10;
  p1.page_bytes = 40960;
  p1.switches = 5;
  p2.pid = 101;
  p2.comm = "loader";
  p2.page_allocs = 2;
  p2.page_bytes = 8192;
  ASSERT_TRUE(set.on_process_stats(1'700'000'000'000'000'000, 5'000'000'000, {p1, p2}));
  ASSERT_TRUE(set.on_device_counters(1'700'000'001'000'000'000, "rdma", {port(3)}));
  ASSERT_TRUE(set.on_device_counters(1'700'000'006'000'000'000, "rdma", {port(8)}));
  hal::SessionCounters lost;
  lost.call_drops = 1200;
  lost.lost_calls = 7;
  ASSERT_TRUE(set.on_session_counters(lost, nullptr));
  ASSERT_TRUE(set.on_agent_stats(agent_stats(500, 50, lost, 2, {{"cuda", 40}}, 65536)));
  ASSERT_TRUE(set.on_chains(chains_of({{"HIGH", 1}, {"LOW", 2}}), 0));
  ASSERT_TRUE(set.on_steps({{0.016, 0.5, -1}, {0.032, 0.25, 0.75}}));
  ASSERT_TRUE(set.commit());

  std::string t = m.exposition();
  EXPECT_EQ(sample(t, "ingero_page_allocations_total"), 12);
  EXPECT_EQ(sample(t, "ingero_page_allocated_bytes_total"), 49152);
  EXPECT_EQ(
      sample(
          t,
          R"(ingero_rdma_port_rcv_errors_total{rdma_device="mlx5_0",rdma_port="1",rdma_transport="InfiniBand"})"),
      8);
  EXPECT_EQ(sample(t, "ingero_events_total"), 500);
  EXPECT_EQ(sample(t, R"(ingero_dropped_records_total{kind="calls"})"), 1200);
  EXPECT_EQ(sample(t, "ingero_untraced_calls_total"), 7);
  EXPECT_EQ(sample(t, "ingero_store_errors_total"), 2);
  EXPECT_EQ(sample(t, R"(ingero_attached_probes{backend="cuda"})"), 40);
  EXPECT_EQ(sample(t, "ingero_db_bytes"), 65536);
  EXPECT_EQ(sample(t, R"(ingero_causal_chains_active{severity="HIGH"})"), 1);
  EXPECT_EQ(sample(t, R"(ingero_causal_chains_active{severity="MEDIUM"})"), 0);
  EXPECT_EQ(sample(t, R"(ingero_causal_chains_active{severity="LOW"})"), 2);
  EXPECT_EQ(sample(t, "ingero_step_duration_seconds_count"), 2);
  EXPECT_EQ(sample(t, "ingero_step_gpu_busy_ratio_count"), 1);

  EXPECT_EQ(query_rows(db,
                       "SELECT timestamp, cpu_pct, mem_pct, mem_avail, swap_mb, load_avg, "
                       "procs_running FROM system_snapshots"),
            (std::vector<std::vector<std::string>>{
                {"1700000000000000000", "12.500000", "40.000000", "2048", "16", "1.500000", "3"}}));
  EXPECT_EQ(query_rows(db,
                       "SELECT timestamp, duration, pid, comm, switches, page_allocs, "
                       "page_bytes FROM process_stats ORDER BY pid"),
            (std::vector<std::vector<std::string>>{
                {"1700000000000000000", "5000000000", "100", "train", "5", "10", "40960"},
                {"1700000000000000000", "5000000000", "101", "loader", "0", "2", "8192"}}));
  EXPECT_EQ(query_rows(db,
                       "SELECT timestamp, backend, device, port, counter, value, is_error, "
                       "attributes FROM device_counters ORDER BY timestamp"),
            (std::vector<std::vector<std::string>>{
                {"1700000001000000000", "rdma", "mlx5_0", "1", "port_rcv_errors", "3", "1",
                 R"({"transport":"InfiniBand"})"},
                {"1700000006000000000", "rdma", "mlx5_0", "1", "port_rcv_errors", "8", "1",
                 R"({"transport":"InfiniBand"})"}}));
  EXPECT_EQ(query_int(db, "SELECT call_drops FROM sessions"), 1200);
}

}  // namespace
}  // namespace ingero::test
