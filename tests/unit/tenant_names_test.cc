// Naming cgroups from the host (kernelside/tenant_names.h), unprivileged, over a fake /proc,
// cgroup hierarchy and runtime state: which files give which name, exactly once per cgroup,
// and what is refused (the host's HOSTNAME, a symlink out of the container, a FIFO).
#include "kernelside/tenant_names.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/unit/fake_host.h"

namespace ingero::kernelside {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;
using test::FakeHost;
using test::kId;
using test::kScope;
using test::kUid;
using test::put;

TEST(TenantNames, PodNamesFromEnvironServiceAccountAndContainerdState) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "PATH=/bin\0HOSTNAME=trainer-7f9c-x2k4\0"s);
  h.service_account(100, "team-a");
  h.containerd_state(kId, R"("io.kubernetes.cri.container-type":"container",)"
                          R"("io.kubernetes.cri.container-name":"trainer")");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.id, id);
  EXPECT_EQ(t.path, kScope);
  EXPECT_EQ(t.layout.pod_uid, kUid);
  EXPECT_EQ(t.layout.container_id, kId);
  EXPECT_EQ(t.names.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(t.names.pod_namespace, "team-a");
  EXPECT_EQ(t.names.container, "trainer");
  EXPECT_EQ(t.names.from, "containerd,environ,serviceaccount");
  TenantCost c = r.cost();
  EXPECT_EQ(c.cgroups, 1u);
  EXPECT_EQ(c.named, 1u);
  EXPECT_EQ(c.reads, 4u);  // cgroup, config.json, environ, namespace
  EXPECT_EQ(
      c.files,
      (std::map<std::string, uint64_t>{
          {"cgroup", 1}, {"containerd", 1}, {"environ", 1}, {"serviceaccount", 1}, {"uts", 1}}));
  EXPECT_GT(c.ns, 0);
  // Read once: later calls, from any process, come from the cache.
  EXPECT_TRUE(r.settled(id));
  EXPECT_EQ(r.resolve(id, 100).names.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(r.resolve(id, 999).names.container, "trainer");
  EXPECT_EQ(r.cost().reads, 4u);
  ASSERT_EQ(r.all().size(), 1u);
  EXPECT_EQ(r.find(id)->names.pod_namespace, "team-a");
}

// --no-tenant-names (sources.names = false) reads no process's environment, service account or
// runtime state at all: only the cgroup file that places the process. The path and its layout
// (ids) are kept; no name is. A security property (docs/security.md).
TEST(TenantNames, WithoutNamesNoEnvironmentOrStateIsRead) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "PATH=/bin\0HOSTNAME=trainer-7f9c-x2k4\0API_KEY=secret\0"s);
  h.service_account(100, "team-a");
  h.containerd_state(kId, R"("io.kubernetes.cri.container-name":"trainer")");
  kernelside::TenantSources src = h.sources();
  src.names = false;
  TenantResolver r(src);
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.path, kScope);
  EXPECT_EQ(t.layout.pod_uid, kUid);
  EXPECT_EQ(t.layout.container_id, kId);
  EXPECT_FALSE(t.names.any());
  EXPECT_EQ(r.cost().files, (std::map<std::string, uint64_t>{{"cgroup", 1}}));
  EXPECT_EQ(r.cost().reads, 1u);
  EXPECT_EQ(r.resolve_path(id + 1, kScope).names.any(), false);
  EXPECT_EQ(r.cost().files, (std::map<std::string, uint64_t>{{"cgroup", 1}}));
}

TEST(TenantNames, RuntimeStateNamesComeFirstAndSpareTheProcessReads) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  h.service_account(100, "team-a");
  h.containerd_state(kId,
                     R"("io.kubernetes.cri.container-name":"trainer",)"
                     R"("io.kubernetes.cri.sandbox-name":"trainer-7f9c-x2k4-with-a-long-name",)"
                     R"("io.kubernetes.cri.sandbox-namespace":"team-a",)"
                     R"("io.kubernetes.cri.sandbox-uid":")" +
                         kUid + "\"");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.names.pod, "trainer-7f9c-x2k4-with-a-long-name");
  EXPECT_EQ(t.names.pod_namespace, "team-a");
  EXPECT_EQ(t.names.container, "trainer");
  EXPECT_EQ(t.names.from, "containerd");
  EXPECT_EQ(r.cost().files, (std::map<std::string, uint64_t>{{"cgroup", 1}, {"containerd", 1}}));
}

TEST(TenantNames, StateOfAnotherPodIsNotTaken) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  h.containerd_state(kId,
                     R"("io.kubernetes.cri.container-name":"other",)"
                     R"("io.kubernetes.cri.sandbox-uid":"00000000-0000-0000-0000-000000000000")");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.names.container, std::nullopt);
  EXPECT_EQ(t.names.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(t.names.pod_namespace, std::nullopt);  // no service account mounted
  EXPECT_EQ(t.names.from, "environ");
}

TEST(TenantNames, HostsHostnameIsNotAPodName) {
  // A host-network pod shares the node's UTS namespace: its HOSTNAME names the node.
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "HOSTNAME=gpu-node-17\0"s, /*own_uts=*/false);
  h.service_account(100, "team-a");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.names.pod, std::nullopt);
  EXPECT_EQ(t.names.pod_namespace, "team-a");
  EXPECT_EQ(r.cost().files.count("environ"), 0u);
}

TEST(TenantNames, ServiceAccountCannotPointOutOfTheContainer) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "HOSTNAME=trainer\0"s);
  std::string dir = h.proc("100/root/var/run/secrets/kubernetes.io/serviceaccount");
  fs::create_directories(dir);
  // An absolute link resolves in the container's root, where there is no such file; this
  // host's file (here: the fake host's own, named absolutely) is never read.
  put(h.proc("100/host-secret"), "kube-system\n");
  fs::create_symlink(h.proc("100/host-secret"), dir + "/namespace");
  TenantResolver r(h.sources());
  EXPECT_EQ(r.resolve(id, 100).names.pod_namespace, std::nullopt);
}

TEST(TenantNames, AFifoIsNotReadAndDoesNotBlock) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.process(100, kScope, "HOSTNAME=trainer\0"s);
  std::string dir = h.proc("100/root/var/run/secrets/kubernetes.io/serviceaccount");
  fs::create_directories(dir);
  ASSERT_EQ(mkfifo((dir + "/namespace").c_str(), 0600), 0);
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.names.pod_namespace, std::nullopt);
  EXPECT_EQ(t.names.pod, "trainer");
}

TEST(TenantNames, UnknownLayoutKeepsThePathAndReadsNothingElse) {
  FakeHost h;
  std::string path = "/system.slice/batch-reindex.service";
  uint64_t id = h.cgroup(path);
  h.process(100, path, "HOSTNAME=somewhere\0"s);
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.path, path);
  EXPECT_FALSE(t.layout.recognised());
  EXPECT_FALSE(t.names.any());
  EXPECT_EQ(t.names.from, "");
  EXPECT_EQ(r.cost().files, (std::map<std::string, uint64_t>{{"cgroup", 1}}));
  EXPECT_EQ(r.cost().named, 0u);
}

TEST(TenantNames, AProcessThatLeftTheCgroupLendsItNothingButThePathIsFound) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  uint64_t other = h.cgroup("/system.slice/x.service");
  // It moved since the event: its HOSTNAME and files are not the pod's.
  h.process(100, "/system.slice/x.service", "HOSTNAME=not-the-pod\0"s);
  h.containerd_state(kId, R"("io.kubernetes.cri.container-name":"trainer")");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.path, kScope);  // from the hierarchy
  EXPECT_EQ(t.names.pod, std::nullopt);
  EXPECT_EQ(t.names.container, "trainer");
  EXPECT_EQ(t.names.from, "containerd");
  EXPECT_TRUE(r.settled(id));
  EXPECT_EQ(r.cost().files.count("environ"), 0u);
  EXPECT_EQ(r.cost().walks, 1u);
  EXPECT_EQ(r.resolve(other, 100).path, "/system.slice/x.service");
  EXPECT_EQ(r.cost().walks, 1u);  // its own /proc/PID/cgroup placed it
}

TEST(TenantNames, APathRelativeToTheTracersCgroupNamespaceIsPlacedByTheHierarchy) {
  // A tracer in a container with a cgroup namespace of its own reads other processes' paths
  // relative to its own cgroup.
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  std::string rel =
      "/../../kubepods-burstable-pod3f2a1b2c_4d5e_4f70_8192_a3b4c5d6e7f8.slice/"
      "cri-containerd-" +
      kId + ".scope";
  h.process(100, rel, "HOSTNAME=trainer-7f9c-x2k4\0"s);
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.path, kScope);
  EXPECT_EQ(t.names.pod, "trainer-7f9c-x2k4");  // the process is in it: its files count
  // A relative path that does not end the cgroup's lends nothing.
  uint64_t id2 = h.cgroup("/kubepods.slice/kubepods-pod3f2a1b2c_4d5e_4f70_8192_a3b4c5d6e7f9.slice");
  h.process(200, "/../../elsewhere.slice", "HOSTNAME=other\0"s);
  TenantResolver r2(h.sources());
  CgroupTenant t2 = r2.resolve(id2, 200);
  EXPECT_EQ(t2.path, "/kubepods.slice/kubepods-pod3f2a1b2c_4d5e_4f70_8192_a3b4c5d6e7f9.slice");
  EXPECT_EQ(t2.names.pod, std::nullopt);
}

TEST(TenantNames, ACgroupFoundNowhereIsTriedThreeTimes) {
  FakeHost h;
  h.cgroup("/system.slice/x.service");
  uint64_t gone = h.cgroup("/system.slice/gone.service");
  fs::remove(
      h.cg("/system.slice/gone.service"));  // (its inode may come back: nothing is made after)
  h.process(100, "/system.slice/x.service", "");
  TenantResolver r(h.sources());
  EXPECT_EQ(r.resolve(gone, 100).path, "");
  EXPECT_FALSE(r.settled(gone));
  EXPECT_EQ(r.resolve(gone, 4242).path, "");  // a process that is gone
  EXPECT_FALSE(r.settled(gone));
  EXPECT_EQ(r.resolve(gone, 100).path, "");
  EXPECT_TRUE(r.settled(gone));
  EXPECT_EQ(r.cost().walks, 1u);  // once per 10 s
  EXPECT_EQ(r.resolve(0, 100).path, "");
  EXPECT_TRUE(r.settled(0));
}

TEST(TenantNames, ACgroupKnownOnlyByItsPathGetsTheRuntimesNames) {
  FakeHost h;
  uint64_t id = h.cgroup(kScope);
  h.containerd_state(kId, R"("io.kubernetes.cri.container-name":"trainer",)"
                          R"("io.kubernetes.cri.sandbox-name":"trainer-7f9c-x2k4",)"
                          R"("io.kubernetes.cri.sandbox-namespace":"team-a")");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve_path(id, kScope);
  EXPECT_EQ(t.path, kScope);
  EXPECT_EQ(t.names.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(t.names.container, "trainer");
  EXPECT_TRUE(r.settled(id));
}

TEST(TenantNames, DockerContainerName) {
  FakeHost h;
  std::string path = "/system.slice/docker-" + kId + ".scope";
  uint64_t id = h.cgroup(path);
  h.process(100, path, "HOSTNAME=9b1c2d3e4f5a\0"s);
  put(h.state() + "/containers/" + kId + "/config.v2.json", R"({"Name":"/web-1"})");
  TenantResolver r(h.sources());
  CgroupTenant t = r.resolve(id, 100);
  EXPECT_EQ(t.names.container, "web-1");
  EXPECT_EQ(t.names.pod, std::nullopt);  // not a pod: HOSTNAME is not read
  EXPECT_EQ(t.names.from, "docker");
}

TEST(TenantNames, WalkFindsEveryCgroupByInode) {
  FakeHost h;
  uint64_t a = h.cgroup(kScope);
  uint64_t b = h.cgroup("/system.slice/x.service");
  auto paths = walk_cgroup_paths(h.cg());
  EXPECT_EQ(paths.at(a), kScope);
  EXPECT_EQ(paths.at(b), "/system.slice/x.service");
  struct stat st {};
  ASSERT_EQ(stat(h.cg().c_str(), &st), 0);
  EXPECT_EQ(paths.at(st.st_ino), "/");
  EXPECT_TRUE(walk_cgroup_paths(h.cg("/absent")).empty());
}

TEST(TenantNames, TheV2MountIsFoundInMountinfo) {
  FakeHost h;
  put(h.proc("self/mountinfo"),
      "31 30 0:27 / /sys/fs/cgroup/unified rw,relatime shared:11 - cgroup2 cgroup2 rw\n");
  TenantSources s = h.sources();
  s.cgroup_root = "";
  EXPECT_EQ(TenantResolver(s).cgroup_root(), "/sys/fs/cgroup/unified");
}

}  // namespace
}  // namespace ingero::kernelside
