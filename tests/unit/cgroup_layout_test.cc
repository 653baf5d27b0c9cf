// The cgroup path parser (kernelside/cgroup_layout.h) on the layouts of real hosts, exactly:
// systemd and cgroupfs drivers, containerd, CRI-O and Docker, the QoS classes, nested nodes
// (kind), and what it must not take.
#include "kernelside/cgroup_layout.h"

#include <gtest/gtest.h>

#include <string>

namespace ingero::kernelside {
namespace {

const std::string kId = "9b1c2d3e4f5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const std::string kId2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const std::string kUid = "3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8";
const std::string kUidSystemd = "3f2a1b2c_4d5e_4f70_8192_a3b4c5d6e7f8";

// The layout as one line: driver|runtime|container|monitor|pod uid|qos.
std::string show(const CgroupLayout& l) {
  return std::string(l.driver) + "|" + std::string(l.runtime) + "|" + l.container_id + "|" +
         (l.monitor ? "monitor" : "") + "|" + l.pod_uid + "|" + std::string(qos_name(l.qos));
}
std::string parse(const std::string& p) { return show(parse_cgroup_path(p)); }

TEST(CgroupLayout, SystemdDriverContainerdBurstable) {
  EXPECT_EQ(parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd +
                  ".slice/cri-containerd-" + kId + ".scope"),
            "systemd|containerd|" + kId + "||" + kUid + "|burstable");
}

TEST(CgroupLayout, SystemdDriverBestEffortAndGuaranteed) {
  EXPECT_EQ(parse("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" +
                  kUidSystemd + ".slice/cri-containerd-" + kId + ".scope"),
            "systemd|containerd|" + kId + "||" + kUid + "|besteffort");
  // Guaranteed pods have no QoS slice.
  EXPECT_EQ(parse("/kubepods.slice/kubepods-pod" + kUidSystemd + ".slice/cri-containerd-" + kId +
                  ".scope"),
            "systemd|containerd|" + kId + "||" + kUid + "|guaranteed");
}

TEST(CgroupLayout, SystemdDriverCrioDockerAndMonitor) {
  std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd + ".slice/";
  EXPECT_EQ(parse(pod + "crio-" + kId + ".scope"),
            "systemd|cri-o|" + kId + "||" + kUid + "|burstable");
  EXPECT_EQ(parse(pod + "crio-conmon-" + kId + ".scope"),
            "systemd|cri-o|" + kId + "|monitor|" + kUid + "|burstable");
  EXPECT_EQ(parse(pod + "docker-" + kId + ".scope"),
            "systemd|docker|" + kId + "||" + kUid + "|burstable");
  // The pod's own slice: a pod without a container.
  EXPECT_EQ(parse(pod), "systemd||||" + kUid + "|burstable");
  // Sub-cgroups a container makes for itself stay the container's.
  EXPECT_EQ(parse(pod + "cri-containerd-" + kId + ".scope/init.scope"),
            "systemd|containerd|" + kId + "||" + kUid + "|burstable");
}

TEST(CgroupLayout, StaticPodUidIsAConfigHash) {
  EXPECT_EQ(parse("/kubepods.slice/kubepods-burstable.slice/"
                  "kubepods-burstable-pod6b0f2c9e4d8a7b1c3e5f7a9b0c2d4e6f.slice/cri-containerd-" +
                  kId + ".scope"),
            "systemd|containerd|" + kId + "||6b0f2c9e4d8a7b1c3e5f7a9b0c2d4e6f|burstable");
}

TEST(CgroupLayout, CgroupfsDriver) {
  EXPECT_EQ(parse("/kubepods/burstable/pod" + kUid + "/" + kId),
            "cgroupfs||" + kId + "||" + kUid + "|burstable");
  EXPECT_EQ(parse("/kubepods/besteffort/pod" + kUid + "/" + kId),
            "cgroupfs||" + kId + "||" + kUid + "|besteffort");
  EXPECT_EQ(parse("/kubepods/pod" + kUid + "/" + kId),
            "cgroupfs||" + kId + "||" + kUid + "|guaranteed");
  EXPECT_EQ(parse("/kubepods/pod" + kUid + "/crio-" + kId),
            "cgroupfs|cri-o|" + kId + "||" + kUid + "|guaranteed");
  EXPECT_EQ(parse("/kubepods/burstable/pod" + kUid), "cgroupfs||||" + kUid + "|burstable");
  // A kubelet with --cgroup-root=/kubelet.
  EXPECT_EQ(parse("/kubelet/kubepods/besteffort/pod" + kUid + "/" + kId),
            "cgroupfs||" + kId + "||" + kUid + "|besteffort");
}

TEST(CgroupLayout, KindNodeInsideDockerTheInnermostContainerWins) {
  std::string node = "/system.slice/docker-" + kId2 + ".scope";
  EXPECT_EQ(parse(node), "systemd|docker|" + kId2 + "|||");
  EXPECT_EQ(parse(node +
                  "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
                  "kubelet-kubepods-besteffort-pod" +
                  kUidSystemd + ".slice/cri-containerd-" + kId + ".scope"),
            "systemd|containerd|" + kId + "||" + kUid + "|besteffort");
  // The pod slice alone under the node: the node's container is not the pod's.
  EXPECT_EQ(parse(node + "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" +
                  kUidSystemd + ".slice"),
            "systemd||||" + kUid + "|guaranteed");
}

TEST(CgroupLayout, PlainDockerAndPodman) {
  EXPECT_EQ(parse("/system.slice/docker-" + kId + ".scope"), "systemd|docker|" + kId + "|||");
  EXPECT_EQ(parse("/docker/" + kId), "cgroupfs|docker|" + kId + "|||");
  EXPECT_EQ(parse("/machine.slice/libpod-" + kId + ".scope"), "systemd|podman|" + kId + "|||");
  EXPECT_EQ(parse("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-conmon-" + kId +
                  ".scope"),
            "systemd|podman|" + kId + "|monitor||");
  EXPECT_EQ(parse("/libpod_parent/libpod-" + kId), "cgroupfs|podman|" + kId + "|||");
}

TEST(CgroupLayout, HybridHostPathsReadTheSame) {
  // /proc/PID/cgroup's 0:: line on a hybrid host (v2 at /sys/fs/cgroup/unified).
  auto path = v2_path_of(
      "12:pids:/kubepods.slice/kubepods-burstable.slice\n"
      "1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
      kUidSystemd + ".slice/cri-containerd-" + kId +
      ".scope\n"
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" +
      kUidSystemd + ".slice/cri-containerd-" + kId + ".scope\n");
  ASSERT_TRUE(path);
  EXPECT_EQ(parse(*path), "systemd|containerd|" + kId + "||" + kUid + "|burstable");
  EXPECT_EQ(v2_path_of("4:memory:/x\n1:cpu:/\n"), std::nullopt);
  EXPECT_EQ(v2_path_of("0::/\n"), "/");
}

TEST(CgroupLayout, UnknownLayoutsAreNotGuessed) {
  for (const std::string& p : std::vector<std::string>{
           "/", "", "/system.slice/containerd.service",
           "/user.slice/user-1000.slice/session-7.scope", "/init.scope",
           "/system.slice/kubelet.service",
           // A short id, upper case, a stray character: not a runtime's id.
           "/system.slice/docker-9b1c2d3e4f5a.scope", "/docker/" + std::string(64, 'A'),
           "/system.slice/docker-" + kId.substr(0, 63) + "g.scope",
           // A bare id outside a pod or /docker; nerdctl's /default/<id> is not taken either.
           "/" + kId, "/default/" + kId,
           // A pod UID of the wrong shape, or a pod without the kubepods parents.
           "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podxyz.slice",
           "/kubepods/burstable/pod3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8x/" + kId,
           "/pods/pod" + kUid + "/" + kId, "/burstable/pod" + kUid + "/" + kId,
           "/mykubepods-pod" + kUidSystemd + ".slice",
           "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + kUidSystemd,
           "/system.slice/cri-containerd-" + kId + ".service"}) {
    auto l = parse_cgroup_path(p);
    EXPECT_EQ(show(l), "|||||") << p;
    EXPECT_FALSE(l.recognised()) << p;
  }
}

TEST(CgroupLayout, ContainerAndPodPredicates) {
  auto l = parse_cgroup_path("/kubepods/pod" + kUid + "/crio-conmon-" + kId);
  EXPECT_TRUE(l.kubernetes());
  EXPECT_FALSE(l.container());  // the monitor, not the container
  EXPECT_TRUE(l.recognised());
  l = parse_cgroup_path("/system.slice/docker-" + kId + ".scope");
  EXPECT_FALSE(l.kubernetes());
  EXPECT_TRUE(l.container());
}

TEST(CgroupLayout, Cgroup2MountOnUnifiedAndHybridHosts) {
  std::string unified =
      "25 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
      "rw,nsdelegate\n";
  EXPECT_EQ(cgroup2_mount(unified), "/sys/fs/cgroup");
  std::string hybrid =
      "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec shared:10 - tmpfs tmpfs ro,mode=755\n"
      "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:11 - cgroup2 "
      "cgroup2 rw,nsdelegate\n"
      "32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid shared:12 - cgroup cgroup "
      "rw,xattr,name=systemd\n";
  EXPECT_EQ(cgroup2_mount(hybrid), "/sys/fs/cgroup/unified");
  // Elsewhere, with a space in its name; a bind mount of a sub-tree is not the hierarchy.
  std::string other =
      "40 1 0:30 /kubepods /mnt/sub rw - cgroup2 cgroup2 rw\n"
      "41 1 0:30 / /mnt/my\\040cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(cgroup2_mount(other), "/mnt/my cgroup");
  EXPECT_EQ(cgroup2_mount("22 1 0:20 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"),
            std::nullopt);
  EXPECT_EQ(cgroup2_mount(""), std::nullopt);
}

TEST(CgroupLayout, EnvironValue) {
  using namespace std::string_literals;
  std::string env = "PATH=/usr/bin\0HOSTNAME=trainer-7f9c-x2k4\0HOSTNAME=second\0HOME=/root"s;
  EXPECT_EQ(environ_value(env, "HOSTNAME"), "trainer-7f9c-x2k4");
  EXPECT_EQ(environ_value(env, "HOME"), "/root");
  EXPECT_EQ(environ_value(env, "HOST"), std::nullopt);
  EXPECT_EQ(environ_value("XHOSTNAME=a\0"s, "HOSTNAME"), std::nullopt);
  EXPECT_EQ(environ_value("A=1\0HOSTNAME=\0"s, "HOSTNAME"), "");
  EXPECT_EQ(environ_value("", "HOSTNAME"), std::nullopt);
}

TEST(CgroupLayout, KubernetesNameRules) {
  EXPECT_TRUE(dns_label("team-a"));
  EXPECT_TRUE(dns_label(std::string(63, 'a')));
  EXPECT_FALSE(dns_label(std::string(64, 'a')));
  EXPECT_FALSE(dns_label("Team-a"));
  EXPECT_FALSE(dns_label("-a"));
  EXPECT_FALSE(dns_label("a-"));
  EXPECT_FALSE(dns_label(""));
  EXPECT_FALSE(dns_label("a.b"));
  EXPECT_TRUE(dns_subdomain("trainer-7f9c-x2k4"));
  EXPECT_TRUE(dns_subdomain("web.example-1"));
  EXPECT_FALSE(dns_subdomain("web..x"));
  EXPECT_FALSE(dns_subdomain("web x"));
  EXPECT_FALSE(dns_subdomain("\x1b[31mred"));
}

TEST(CgroupLayout, NamesFromContainerdAndCrioState) {
  // containerd's config.json of a container, and of the pod's sandbox.
  auto c = names_from_oci_config(R"({"ociVersion":"1.1.0","annotations":{
      "io.kubernetes.cri.container-type":"container",
      "io.kubernetes.cri.container-name":"trainer",
      "io.kubernetes.cri.sandbox-name":"trainer-7f9c-x2k4",
      "io.kubernetes.cri.sandbox-namespace":"team-a",
      "io.kubernetes.cri.sandbox-uid":"3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8"}})");
  EXPECT_EQ(c.container, "trainer");
  EXPECT_EQ(c.pod, "trainer-7f9c-x2k4");
  EXPECT_EQ(c.pod_namespace, "team-a");
  EXPECT_EQ(c.pod_uid, kUid);
  EXPECT_FALSE(c.sandbox);
  auto s = names_from_oci_config(R"({"annotations":{
      "io.kubernetes.cri.container-type":"sandbox",
      "io.kubernetes.cri.sandbox-name":"trainer-7f9c-x2k4"}})");
  EXPECT_TRUE(s.sandbox);
  EXPECT_EQ(s.container, std::nullopt);
  EXPECT_EQ(s.pod, "trainer-7f9c-x2k4");
  // CRI-O's keys.
  auto o = names_from_oci_config(R"({"annotations":{"io.kubernetes.container.name":"etl",
      "io.kubernetes.pod.name":"etl-5d8f","io.kubernetes.pod.namespace":"team-b"}})");
  EXPECT_EQ(o.container, "etl");
  EXPECT_EQ(o.pod, "etl-5d8f");
  EXPECT_EQ(o.pod_namespace, "team-b");
  // Names breaking the rules are dropped; damaged or foreign JSON gives nothing.
  auto bad =
      names_from_oci_config(R"({"annotations":{"io.kubernetes.cri.container-name":"Bad Name\n",)"
                            R"("io.kubernetes.cri.sandbox-namespace":42}})");
  EXPECT_EQ(bad.container, std::nullopt);
  EXPECT_EQ(bad.pod_namespace, std::nullopt);
  EXPECT_FALSE(names_from_oci_config(R"({"annotations":{)").container);
  EXPECT_FALSE(names_from_oci_config("[1,2]").container);
  EXPECT_FALSE(names_from_oci_config("").pod);
}

TEST(CgroupLayout, NamesFromDockerState) {
  auto d = names_from_docker_config(R"({"ID":"x","Name":"/web-1","Config":{"Labels":{}}})");
  EXPECT_EQ(d.container, "web-1");
  EXPECT_EQ(d.pod, std::nullopt);
  // cri-dockerd: the Kubernetes labels, not the k8s_... name.
  auto k = names_from_docker_config(
      R"({"Name":"/k8s_etl_etl-5d8f_team-b_3f2a_0","Config":{"Labels":{)"
      R"("io.kubernetes.container.name":"etl","io.kubernetes.pod.name":"etl-5d8f",)"
      R"("io.kubernetes.pod.namespace":"team-b","io.kubernetes.docker.type":"container"}}})");
  EXPECT_EQ(k.container, "etl");
  EXPECT_EQ(k.pod, "etl-5d8f");
  EXPECT_EQ(k.pod_namespace, "team-b");
  EXPECT_EQ(names_from_docker_config(R"({"Name":"/-bad"})").container, std::nullopt);
  EXPECT_EQ(names_from_docker_config(R"({"Name":7})").container, std::nullopt);
}

}  // namespace
}  // namespace ingero::kernelside
