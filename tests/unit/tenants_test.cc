// Tenants end to end without privileges: cgroup_metadata's names written and read back (and
// added to a file from before them), the engine naming a pod as the noisy neighbour and the
// per-tenant report, `explain --group-by pod`, and the per-process Prometheus labels.
#include "engine/tenants.h"

#include <gtest/gtest.h>

#include <sstream>

#include "app/device_poller.h"
#include "app/explain_report.h"
#include "app/session_chains.h"
#include "hal/device_sampler.h"
#include "serve/metrics/metrics.h"
#include "store/cgroup_metadata.h"
#include "store/schema.h"
#include "store/sql_trace_source.h"
#include "tests/support/sink_inputs.h"
#include "tests/unit/fake_host.h"

namespace ingero {
namespace {

using hal::Event;
using hal::EventKind;
using hal::Field;
using namespace std::string_literals;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kTrainer = 11, kEtl = 22, kSidecar = 33, kService = 44;
constexpr uint32_t kGpuPid = 100, kHogPid = 200, kSidecarPid = 300, kServicePid = 400;

store::CgroupRow pod_row(uint64_t id, const char* ns, const char* pod, const char* container,
                         const char* uid, const std::string& path) {
  store::CgroupRow r;
  r.cgroup_id = id;
  r.path = path;
  r.container_id = std::string(64, char('a' + id % 6));
  r.pod = pod;
  r.pod_namespace = ns;
  r.container = container;
  r.pod_uid = uid;
  r.qos = "burstable";
  r.runtime = "containerd";
  r.names_from = "containerd";
  return r;
}

// Two pods on one node: team-a's trainer makes GPU calls; team-b's etl (a CPU hog) preempts
// it 3 times for 100 ms, in three of its syncs; a sidecar of the trainer's own pod and a system
// service once each.
class TwoTenants : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = test::temp_path("tenants.db");
    auto w = store::TraceWriter::open(path_);
    ASSERT_TRUE(w);
    store::SessionInfo si;
    si.node = "gpu-node-1";
    si.mono_offset_ns = 1'700'000'000'000'000'000;
    ASSERT_TRUE((*w)->begin_session(si));
    writer_ = std::move(*w);
    ASSERT_TRUE(writer_->add_cgroup(pod_row(kTrainer, "team-a", "trainer-7f9c-x2k4", "trainer",
                                            "3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8",
                                            "/kubepods.slice/a/trainer.scope")));
    ASSERT_TRUE(writer_->add_cgroup(pod_row(kEtl, "team-b", "etl-5d8f", "etl",
                                            "11111111-2222-4333-8444-555555555555",
                                            "/kubepods.slice/b/etl.scope")));
    ASSERT_TRUE(writer_->add_cgroup(pod_row(kSidecar, "team-a", "trainer-7f9c-x2k4", "proxy",
                                            "3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8",
                                            "/kubepods.slice/a/proxy.scope")));
    store::CgroupRow svc;
    svc.cgroup_id = kService;
    svc.path = "/system.slice/batch-reindex.service";
    ASSERT_TRUE(writer_->add_cgroup(svc));
    // The three syncs the hog's preemptions fall in are slow: the tail of the op.
    for (int i = 0; i < 40; ++i) {
      Event e = call(uint64_t(i) * 50 * kMs, 2 * kMs);
      if (i % 10 == 0 && i < 30) {
        e.dur_ns = 110 * kMs;
        e.off_cpu_ns = 100 * kMs;
        e.preempts = e.switches = 1;
        e.set(Field::kPeerPid, kHogPid);
        e.set_peer_comm("etl");
      }
      ASSERT_TRUE(writer_->add(e));
    }
    for (int i = 0; i < 3; ++i)
      preempt(uint64_t(i) * 500 * kMs + 10 * kMs, 100 * kMs, kHogPid, "etl", kEtl);
    preempt(1700 * kMs, 30 * kMs, kSidecarPid, "envoy", kSidecar);
    preempt(1800 * kMs, 20 * kMs, kServicePid, "reindex", kService);
    ASSERT_TRUE(writer_->finish({}));
    writer_.reset();
    auto r = store::TraceReader::open(path_);
    ASSERT_TRUE(r);
    reader_ = std::move(*r);
    source_ = std::make_unique<store::SqlTraceSource>(*reader_);
    a_ = engine::analyze(*source_, engine::Window{});
  }
  Event call(uint64_t ts, uint64_t dur) {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = dur;
    e.pid = kGpuPid;
    e.tid = kGpuPid;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = "cudaStreamSynchronize";
    e.kind = EventKind::kSync;
    e.has_ret = true;
    e.cgroup_id = kTrainer;
    return e;
  }
  void preempt(uint64_t ts, uint64_t off, uint32_t by, const char* comm, uint64_t by_cgroup) {
    Event e;
    e.ts_ns = ts;
    e.dur_ns = off;
    e.pid = kGpuPid;
    e.tid = kGpuPid;
    e.set_comm("python3");
    e.vendor = "host";
    e.api = "kernel";
    e.kind = EventKind::kSchedSwitch;
    e.op = "sched_switch";
    e.cgroup_id = kTrainer;
    e.set(Field::kPeerPid, by);
    e.set(Field::kPeerTid, by);
    e.set(Field::kPeerCgroup, by_cgroup);
    e.set(Field::kFlags, 1);
    e.set_peer_comm(comm);
    ASSERT_TRUE(writer_->add(e));
  }
  std::string path_;
  std::unique_ptr<store::TraceWriter> writer_;
  std::unique_ptr<store::TraceReader> reader_;
  std::unique_ptr<store::SqlTraceSource> source_;
  engine::Analysis a_;
};

TEST_F(TwoTenants, CgroupMetadataHoldsTheNamesAndUnknownsAreEmptyOrNull) {
  EXPECT_EQ(test::query_rows(path_,
                             "SELECT cgroup_id, cgroup_path, pod_name, namespace, container_name, "
                             "pod_uid, qos_class, runtime, names_from FROM cgroup_metadata "
                             "WHERE cgroup_id IN (22, 44) ORDER BY cgroup_id"),
            (std::vector<std::vector<std::string>>{
                {"22", "/kubepods.slice/b/etl.scope", "etl-5d8f", "team-b", "etl",
                 "11111111-2222-4333-8444-555555555555", "burstable", "containerd", "containerd"},
                {"44", "/system.slice/batch-reindex.service", "", "", "NULL", "NULL", "NULL",
                 "NULL", "NULL"}}));
  auto c = source_->cgroups();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[kEtl].pod, "etl-5d8f");
  EXPECT_EQ(c[kEtl].pod_namespace, "team-b");
  EXPECT_EQ(c[kEtl].container, "etl");
  EXPECT_EQ(c[kEtl].qos, "burstable");
  EXPECT_EQ(c[kService].path, "/system.slice/batch-reindex.service");
  EXPECT_EQ(c[kService].pod, "");
}

TEST_F(TwoTenants, TheNoisyNeighbourIsNamedByItsPod) {
  const engine::Chain* n = nullptr;
  for (const auto& c : a_.chains)
    if (c.rule == "noisy_neighbour") n = &c;
  ASSERT_NE(n, nullptr);
  // 300 ms of 350 ms preempted went to team-b's pod; the sidecar of the trainer's own pod is
  // not a neighbour.
  EXPECT_EQ(n->summary,
            "Noisy neighbour: pod team-b/etl-5d8f (container etl) took 86% of the GPU threads' "
            "preempted time (300ms, 3 preemptions), mostly etl (pid 200)");
  EXPECT_EQ(n->explanation,
            "Of 350ms that GPU-calling threads spent preempted, 300ms went to tasks in pod "
            "team-b/etl-5d8f (container etl) (cgroup /kubepods.slice/b/etl.scope).");
  ASSERT_EQ(n->fixes.size(), 2u);
  EXPECT_EQ(n->fixes[1],
            "Cap the neighbour: a CPU limit (resources.limits.cpu) on pod team-b/etl-5d8f "
            "(container etl), or cpu.max on its cgroup /kubepods.slice/b/etl.scope");
}

TEST_F(TwoTenants, TheCpuContentionChainNamesThePreemptorsPod) {
  const engine::Chain* c = nullptr;
  for (const auto& x : a_.chains)
    if (x.rule == "cpu_contention") c = &x;
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c->summary.find(" \u2014 3 preemptions by etl (pid 200) in pod team-b/etl-5d8f "
                            "(container etl), 300ms off-CPU"),
            std::string::npos)
      << c->summary;
}

TEST_F(TwoTenants, PerTenantTimesAndWhoPreemptedWhom) {
  auto r = engine::tenant_report(a_);
  EXPECT_TRUE(r.named);
  ASSERT_EQ(r.tenants.size(), 3u);
  const auto& a = r.tenants[0];
  EXPECT_EQ(a.name, "pod team-a/trainer-7f9c-x2k4");
  EXPECT_EQ(a.kind, "pod");
  EXPECT_EQ(a.gpu_pids, std::vector<uint32_t>{kGpuPid});
  EXPECT_EQ(a.calls, 40u);
  EXPECT_EQ(a.api_ns, 37 * 2 * kMs + 3 * 110 * kMs);
  EXPECT_EQ(a.api_off_cpu_ns, 300 * kMs);
  EXPECT_EQ(a.preempted_ns, 350 * kMs);
  EXPECT_EQ(a.preemptions, 5u);
  EXPECT_EQ(a.preempted_by_others_ns, 320 * kMs);  // the sidecar is the pod's own
  EXPECT_EQ(a.containers, (std::vector<std::string>{"trainer", "proxy"}));
  EXPECT_EQ(r.tenants[1].name, "pod team-b/etl-5d8f");
  EXPECT_EQ(r.tenants[1].preempting_ns, 300 * kMs);
  EXPECT_EQ(r.tenants[1].calls, 0u);
  EXPECT_EQ(r.tenants[2].name, "/system.slice/batch-reindex.service");
  EXPECT_EQ(r.tenants[2].kind, "cgroup");
  ASSERT_EQ(r.across.size(), 2u);
  EXPECT_EQ(r.across[0].victim, "pod team-a/trainer-7f9c-x2k4");
  EXPECT_EQ(r.across[0].by, "pod team-b/etl-5d8f");
  EXPECT_EQ(r.across[0].ns, 300 * kMs);
  EXPECT_EQ(r.across[0].count, 3u);
  EXPECT_EQ(r.across[0].top_pid, kHogPid);
  EXPECT_EQ(r.across[0].top_comm, "etl");
  EXPECT_EQ(r.across[1].by, "/system.slice/batch-reindex.service");
  EXPECT_EQ(r.across[1].ns, 20 * kMs);
  // By container, the sidecar is a tenant of its own.
  auto c = engine::tenant_report(a_, engine::TenantGrouping::kContainer);
  EXPECT_EQ(c.tenants[0].name, "pod team-a/trainer-7f9c-x2k4 (container trainer)");
  EXPECT_EQ(c.across.size(), 3u);
}

TEST_F(TwoTenants, ExplainGroupByPodPrintsTheTenants) {
  std::ostringstream out;
  app::ReportOptions o;
  o.group_by = engine::TenantGrouping::kPod;
  app::print_report(out, a_, o);
  std::string s = out.str();
  EXPECT_NE(s.find("\nTENANTS (by pod)\n"), std::string::npos) << s;
  EXPECT_NE(s.find("    pod team-a/trainer-7f9c-x2k4 lost 20.0ms (1 preemption) to "
                   "/system.slice/batch-reindex.service, mostly reindex (pid 400)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("\n  pod team-a/trainer-7f9c-x2k4 (pid 100)                  40     404ms      "
                   "350ms      320ms       0ns\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("    pod team-a/trainer-7f9c-x2k4 lost 300ms (3 preemptions) to pod "
                   "team-b/etl-5d8f, mostly etl (pid 200)\n"),
            std::string::npos)
      << s;
  // Without --group-by the text has no such section; the JSON always has the tenants.
  std::ostringstream plain;
  app::print_report(plain, a_, {});
  EXPECT_EQ(plain.str().find("TENANTS"), std::string::npos);
  auto j = engine::report_json(a_, {});
  EXPECT_EQ(j["tenants"]["grouping"], "pod");
  EXPECT_EQ(j["tenants"]["tenants"][0]["namespace"], "team-a");
  EXPECT_EQ(j["tenants"]["preemptions"][0]["ns"], 300 * kMs);
}

TEST(Tenants, Labels) {
  engine::CgroupInfo c;
  EXPECT_EQ(engine::tenant_label(c), "");
  c.path = "/system.slice/x.service";
  EXPECT_EQ(engine::tenant_label(c), "");
  c.container_id = test::kId;
  EXPECT_EQ(engine::tenant_label(c), "container 9b1c2d3e4f5a");
  c.runtime = "docker";
  EXPECT_EQ(engine::tenant_label(c), "docker container 9b1c2d3e4f5a");
  c.container = "web-1";
  EXPECT_EQ(engine::tenant_label(c), "container web-1");
  c.pod_uid = test::kUid;
  EXPECT_EQ(engine::tenant_label(c), "pod uid " + test::kUid + " (container web-1)");
  c.pod = "web-5d8f";
  EXPECT_EQ(engine::tenant_label(c), "pod web-5d8f (container web-1)");
  c.pod_namespace = "shop";
  EXPECT_EQ(engine::tenant_label(c), "pod shop/web-5d8f (container web-1)");
  EXPECT_EQ(engine::pod_label(c), "pod shop/web-5d8f");
  std::map<uint64_t, engine::CgroupInfo> m = {{7, c}};
  EXPECT_EQ(engine::cgroup_name(m, 7), "pod shop/web-5d8f (container web-1)");
  EXPECT_EQ(engine::cgroup_name(m, 8), "cgroup 8");
}

TEST(Tenants, AFileFromBeforeTheNameColumnsGainsThem) {
  std::string path = test::temp_path("old.db");
  {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w);
    ASSERT_TRUE((*w)->add_cgroup_path(5, "/system.slice/a.service"));
    ASSERT_TRUE((*w)->finish({}));
  }
  {  // as a file written before them
    auto db = store::Db::open(path, store::Db::Mode::kReadWrite);
    ASSERT_TRUE(db);
    for (const char* c : store::kCgroupNameColumns)
      ASSERT_TRUE((*db)->exec(std::string("ALTER TABLE cgroup_metadata DROP COLUMN ") + c));
  }
  {
    auto r = store::TraceReader::open(path);
    ASSERT_TRUE(r);
    auto c = store::read_cgroups((*r)->db());
    ASSERT_TRUE(c);
    EXPECT_EQ(c->at(5).path, "/system.slice/a.service");
    EXPECT_EQ(c->at(5).container, "");
  }
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->finish({}));
  EXPECT_EQ(test::query_rows(path,
                             "SELECT cgroup_path, container_name, names_from FROM "
                             "cgroup_metadata"),
            (std::vector<std::vector<std::string>>{{"/system.slice/a.service", "NULL", "NULL"}}));
  // Columns added in place: the schema's version is the same.
  EXPECT_EQ(test::query_int(path, "SELECT max(version) FROM schema_version"),
            store::kSchemaVersion);
}

TEST(Tenants, APathOnlyUpdateKeepsTheNames) {
  std::string path = test::temp_path("keep.db");
  auto w = store::TraceWriter::open(path);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->add_cgroup(
      pod_row(9, "team-a", "p", "c", "00000000-0000-4000-8000-000000000000", "/old")));
  ASSERT_TRUE((*w)->add_cgroup_path(9, "/new"));
  ASSERT_TRUE((*w)->finish({}));
  EXPECT_EQ(test::query_rows(path,
                             "SELECT cgroup_path, pod_name, container_name FROM "
                             "cgroup_metadata"),
            (std::vector<std::vector<std::string>>{{"/new", "p", "c"}}));
}

TEST(Tenants, ACgroupRowFromTheResolver) {
  test::FakeHost h;
  uint64_t id = h.cgroup(test::kScope);
  h.process(100, test::kScope, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  h.service_account(100, "team-a");
  kernelside::TenantResolver r(h.sources());
  auto row = app::cgroup_row(r.resolve(id, 100));
  EXPECT_EQ(row.cgroup_id, id);
  EXPECT_EQ(row.path, test::kScope);
  EXPECT_EQ(row.container_id, test::kId);
  EXPECT_EQ(row.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(row.pod_namespace, "team-a");
  EXPECT_EQ(row.container, std::nullopt);
  EXPECT_EQ(row.pod_uid, test::kUid);
  EXPECT_EQ(row.qos, "burstable");
  EXPECT_EQ(row.runtime, "containerd");
  EXPECT_EQ(row.names_from, "environ,serviceaccount");
}

// The per-process GPU series name who the process runs for as the per-call series do (pod and
// container mean the same in both: names, so the two families join on them), with the ids its
// cgroup path holds under labels of their own. The names come with the process's traced calls
// (their cgroup, named by the resolver): a GPU series made before them is made again with
// them, and a process ingero does not trace gets none (none of its files is read for them).
TEST(Tenants, PerProcessGpuSeriesCarryThePerCallSeriesNames) {
  test::FakeHost h;
  uint64_t id = h.cgroup(test::kScope);
  h.process(100, test::kScope, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  test::put(h.proc("100/comm"), "python3\n");
  h.service_account(100, "team-a");
  h.containerd_state(test::kId, R"("io.kubernetes.cri.container-name":"trainer")");
  uint64_t other = h.cgroup(test::kPodPath + "/cri-containerd-" + std::string(64, 'e') + ".scope");
  h.process(200, test::kPodPath + "/cri-containerd-" + std::string(64, 'e') + ".scope",
            "HOSTNAME=untraced-x\0"s);
  test::put(h.proc("200/comm"), "python3\n");
  kernelside::TenantResolver r(h.sources());
  app::ProcessLabeller labeller(h.proc());
  serve::Metrics m(true);
  m.set_tenants(&r);
  m.set_process_labels([&](uint32_t pid) { return labeller.of(pid); });
  auto sample = [&](int64_t ts, double util) {
    ASSERT_TRUE(m.on_device_samples(
        {test::gpu_process_sample(ts, 100, util), test::gpu_process_sample(ts, 200, util)}));
  };
  const std::string fam = "ingero_gpu_process_utilization_ratio";
  const std::string unnamed100 = fam + "{comm=\"python3\",container_id=\"" +
                                 test::kId.substr(0, 12) + "\",gpu=\"0\",pid=\"100\",pod_uid=\"" +
                                 test::kUid + "\",source=\"nvml\",uuid=\"GPU-0\"}";
  const std::string named100 =
      fam + "{comm=\"python3\",container=\"trainer\",container_id=\"" + test::kId.substr(0, 12) +
      "\",gpu=\"0\",namespace=\"team-a\",pid=\"100\",pod=\"trainer-7f9c-x2k4\",pod_uid=\"" +
      test::kUid + "\",source=\"nvml\",uuid=\"GPU-0\"}";
  // Before any traced call: the ids only.
  sample(1'000'000'000, 40);
  std::string x = m.exposition();
  EXPECT_NE(x.find(unnamed100 + " 0.4\n"), std::string::npos) << x;
  // Its first traced call brings its cgroup; the next sample has one series, named.
  hal::Event e = test::call("nvidia", "cuda_runtime", hal::EventKind::kLaunch, "cudaLaunchKernel",
                            1'000, 0, 100);
  e.cgroup_id = id;
  m.observe(e);
  sample(1'100'000'000, 60);
  x = m.exposition();
  EXPECT_NE(x.find(named100 + " 0.6\n"), std::string::npos) << x;
  EXPECT_EQ(x.find(unnamed100), std::string::npos) << x;
  // The untraced process: ids only, and nothing of it was read for names.
  EXPECT_NE(x.find(fam +
                   "{comm=\"python3\",container_id=\"eeeeeeeeeeee\",gpu=\"0\",pid=\"200\","
                   "pod_uid=\"" +
                   test::kUid + "\",source=\"nvml\",uuid=\"GPU-0\"} 0.6\n"),
            std::string::npos)
      << x;
  EXPECT_FALSE(r.find(other)) << "the untraced process's cgroup was resolved";
  EXPECT_EQ(r.cost().files.at("environ"), 1u);
}

TEST(Tenants, PerProcessMetricsCarryNamespacePodAndContainer) {
  test::FakeHost h;
  uint64_t id = h.cgroup(test::kScope);
  h.process(100, test::kScope, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  h.service_account(100, "team-a");
  h.containerd_state(test::kId, R"("io.kubernetes.cri.container-name":"trainer")");
  uint64_t plain = h.cgroup("/user.slice/user-1000.slice/session-7.scope");
  h.process(200, "/user.slice/user-1000.slice/session-7.scope", "HOSTNAME=laptop\0"s);
  kernelside::TenantResolver r(h.sources());
  serve::Metrics m(true);
  m.set_tenants(&r);
  auto ev = [](uint32_t pid, uint64_t cg) {
    Event e;
    e.pid = pid;
    e.tid = pid;
    e.set_comm("python3");
    e.vendor = "nvidia";
    e.api = "cuda_runtime";
    e.op = "cudaLaunchKernel";
    e.kind = EventKind::kLaunch;
    e.dur_ns = 1000;
    e.has_ret = true;
    e.cgroup_id = cg;
    return e;
  };
  m.observe(ev(100, id));
  m.observe(ev(100, id));
  m.observe(ev(200, plain));
  std::string x = m.exposition();
  EXPECT_NE(x.find("ingero_gpu_api_calls_total{api=\"cuda_runtime\",comm=\"python3\","
                   "container=\"trainer\",kind=\"launch\",namespace=\"team-a\","
                   "op=\"cudaLaunchKernel\",pid=\"100\",pod=\"trainer-7f9c-x2k4\","
                   "vendor=\"nvidia\"} 2\n"),
            std::string::npos)
      << x;
  // Outside containers the labels are absent (Prometheus reads them as "").
  EXPECT_NE(x.find("ingero_gpu_api_calls_total{api=\"cuda_runtime\",comm=\"python3\","
                   "kind=\"launch\",op=\"cudaLaunchKernel\",pid=\"200\",vendor=\"nvidia\"} 1\n"),
            std::string::npos)
      << x;
  // Read once per cgroup.
  EXPECT_EQ(r.cost().files.at("environ"), 1u);
}

}  // namespace
}  // namespace ingero
