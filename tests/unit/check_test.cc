// `ingero check` host checks on fixture inputs: a fake root with proc/, sys/, dev/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/builtin_backends.h"
#include "app/check_items.h"
#include "tests/support/trace_db.h"
#include "tests/unit/fake_host.h"

namespace ingero::app {
namespace {

using test::put;

// --backends as check and trace read it: a name given twice is one backend (cuda,cuda attached
// every CUDA probe twice, two traps a call); an empty name is an error (`--backends ,` audited
// nothing and passed).
TEST(Check, BackendsNamedTwiceAreOneAndAnEmptyNameIsRefused) {
  hal::BackendRegistry backends;
  register_builtin_backends(backends);
  auto twice = backends.select("cuda,cuda,nccl,cuda");
  ASSERT_TRUE(twice) << twice.error().message;
  ASSERT_EQ(twice->size(), 2u);
  EXPECT_EQ((*twice)[0]->name(), "cuda");
  EXPECT_EQ((*twice)[1]->name(), "nccl");
  for (const char* bad : {",", "cuda,", ",cuda", "cuda,,nccl"}) {
    auto r = backends.select(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message.rfind(std::string("an empty backend name in '") + bad + "'", 0), 0u)
        << r.error().message;
  }
  EXPECT_EQ(backends.select("")->size(), backends.all().size());
}

TEST(Check, HealthyGpuHostFromFixtures) {
  std::string r = test::temp_path("healthy");
  put(r + "/proc/sys/kernel/osrelease", "6.8.0-48-generic\n");
  put(r + "/sys/kernel/btf/vmlinux", std::string(4096, 'x'));
  put(r + "/proc/self/status", "Name:\tingero\nCapEff:\t000001ffffffffff\n");
  put(r + "/proc/sys/kernel/perf_event_paranoid", "4\n");
  put(r + "/sys/bus/event_source/devices/uprobe/type", "9\n");
  put(r + "/proc/mounts", "tracefs /sys/kernel/tracing tracefs rw 0 0\n");
  put(r + "/sys/fs/cgroup/cgroup.controllers", "cpu memory io\n");
  put(r + "/proc/sys/kernel/yama/ptrace_scope", "1\n");
  put(r + "/proc/driver/nvidia/version",
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.211.01\nGCC version\n");
  put(r + "/dev/kfd", "");
  std::filesystem::create_directories(r + "/sys/class/kfd");
  put(r + "/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors", "0\n");
  put(r + "/sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
  put(r + "/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  CheckReport rep;
  hal::BackendRegistry backends;
  register_builtin_backends(backends);
  host_checks({r, backends.all()}, rep);
  auto st = [&](const char* n) { return rep.find(n) ? rep.find(n)->status : CheckStatus::kFail; };
  for (const char* n :
       {"kernel", "btf", "privileges", "perf_event_paranoid", "uprobe_pmu", "tracefs", "cgroup_v2",
        "ptrace_scope", "nvidia_driver", "amd_kfd", "infiniband"})
    EXPECT_EQ(st(n), CheckStatus::kPass) << n;
  EXPECT_EQ(rep.find("kernel")->value, "6.8.0-48-generic");
  EXPECT_EQ(rep.find("privileges")->value, "root");
  EXPECT_EQ(rep.find("nvidia_driver")->value,
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.211.01");
  EXPECT_EQ(rep.find("infiniband")->value, "1 devices, 1 ports");
  EXPECT_TRUE(rep.can_trace());
}

TEST(Check, UnprivilegedHostWithoutBtfCannotTrace) {
  std::string r = test::temp_path("bare");
  put(r + "/proc/sys/kernel/osrelease", "5.4.0\n");
  put(r + "/proc/self/status", "CapEff:\t0000000000000000\n");
  put(r + "/proc/sys/kernel/yama/ptrace_scope", "3\n");
  CheckReport rep;
  hal::BackendRegistry backends;
  register_builtin_backends(backends);
  host_checks({r, backends.all()}, rep);
  EXPECT_EQ(rep.find("btf")->status, CheckStatus::kFail);
  EXPECT_EQ(rep.find("privileges")->status, CheckStatus::kFail);
  EXPECT_NE(rep.find("privileges")->fix.find("setcap cap_bpf,cap_perfmon"), std::string::npos);
  EXPECT_EQ(rep.find("ptrace_scope")->status, CheckStatus::kOptional);
  EXPECT_EQ(rep.find("cgroup_v2")->status, CheckStatus::kOptional);
  EXPECT_EQ(rep.find("nvidia_driver")->value, "absent");
  EXPECT_EQ(rep.find("infiniband")->value, "no devices");
  EXPECT_FALSE(rep.can_trace());
  auto j = check_report_json(rep);
  EXPECT_EQ(j["can_trace"], false);
}

// Root of a user namespace (a rootless container, `unshare -U -r`): every capability in
// CapEff, none the kernel honours for tracing. It passed as "root", "not limiting: ingero runs
// privileged", and the refused load was blamed on the kernel.
TEST(Check, RootOfAUserNamespaceIsNotPrivileged) {
  std::string r = test::temp_path("userns");
  put(r + "/proc/sys/kernel/osrelease", "6.18.0\n");
  put(r + "/proc/self/status", "CapEff:\t000001ffffffffff\n");
  put(r + "/proc/self/uid_map", "         0       1000          1\n");
  CheckReport rep;
  hal::BackendRegistry backends;
  register_builtin_backends(backends);
  host_checks({r, backends.all()}, rep);
  const auto* p = rep.find("privileges");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->status, CheckStatus::kFail);
  EXPECT_EQ(p->value, "user namespace");
  EXPECT_EQ(p->fix,
            "run ingero on the host, or in a container in the host's user namespace with "
            "CAP_BPF+CAP_PERFMON");
  EXPECT_EQ(rep.find("perf_event_paranoid")->detail.find("ingero runs privileged"),
            std::string::npos);
  EXPECT_FALSE(rep.can_trace());
  // The host's own map: every uid to itself.
  put(r + "/proc/self/uid_map", "         0          0 4294967295\n");
  CheckReport host;
  host_checks({r, backends.all()}, host);
  EXPECT_EQ(host.find("privileges")->value, "root");
}

// A hybrid host (v2 at /sys/fs/cgroup/unified) running one pod: the check finds the v2 mount,
// the pod's container, and names it as the tracer would, saying what it read.
TEST(Check, TenantNamesOnAHybridHostSayWhatWasReadAndHowLong) {
  std::string r = test::temp_path("k8s");
  put(r + "/proc/self/mountinfo",
      "30 25 0:26 / /sys/fs/cgroup rw shared:10 - tmpfs tmpfs ro,mode=755\n"
      "31 30 0:27 / /sys/fs/cgroup/unified rw shared:11 - cgroup2 cgroup2 rw,nsdelegate\n");
  std::string cg = r + "/sys/fs/cgroup/unified";
  put(cg + test::kScope + "/cgroup.procs", "4242\n");
  put(r + "/proc/4242/cgroup", "0::" + test::kScope + "\n");
  put(r + "/proc/4242/environ", std::string("HOSTNAME=trainer-7f9c-x2k4\0", 27));
  put(r + "/proc/4242/ns/uts", "pod");
  put(r + "/proc/1/ns/uts", "host");
  put(r + "/proc/1/root/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + test::kId +
          "/config.json",
      R"({"annotations":{"io.kubernetes.cri.container-name":"trainer",)"
      R"("io.kubernetes.cri.sandbox-name":"trainer-7f9c-x2k4",)"
      R"("io.kubernetes.cri.sandbox-namespace":"team-a"}})");
  CheckReport rep;
  tenant_checks({r, {}}, rep);
  ASSERT_NE(rep.find("cgroup_v2"), nullptr);
  EXPECT_EQ(rep.find("cgroup_v2")->status, CheckStatus::kPass);
  EXPECT_EQ(rep.find("cgroup_v2")->value, "hybrid: v2 at /sys/fs/cgroup/unified");
  const CheckItem* t = rep.find("tenant_names");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->status, CheckStatus::kPass);
  EXPECT_EQ(t->value, "5 cgroups, 1 container in 1 pod");
  EXPECT_EQ(t->detail.rfind("walked 5 cgroups under /sys/fs/cgroup/unified in ", 0), 0u)
      << t->detail;
  EXPECT_NE(t->detail.find(" (1 containerd); named 1 as the tracer does, reading 1 cgroup, 1 "
                           "containerd in "),
            std::string::npos)
      << t->detail;
  EXPECT_NE(t->detail.find(": pod team-a/trainer-7f9c-x2k4 (container trainer) [containerd]"),
            std::string::npos)
      << t->detail;
  // Without the runtime's state the pod's name still comes from HOSTNAME; the container's is
  // missing, and the check says where names come from.
  std::filesystem::remove_all(r + "/proc/1/root/run");
  CheckReport bare;
  tenant_checks({r, {}}, bare);
  t = bare.find("tenant_names");
  EXPECT_EQ(t->status, CheckStatus::kPass);
  EXPECT_NE(t->detail.find(": pod trainer-7f9c-x2k4 (container 9b1c2d3e4f5a) [environ]"),
            std::string::npos)
      << t->detail;
}

TEST(Check, NoContainersNothingToName) {
  std::string r = test::temp_path("plain");
  put(r + "/proc/self/mountinfo", "25 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  put(r + "/sys/fs/cgroup/system.slice/ssh.service/cgroup.procs", "1\n");
  CheckReport rep;
  tenant_checks({r, {}}, rep);
  EXPECT_EQ(rep.find("cgroup_v2")->value, "unified hierarchy");
  EXPECT_EQ(rep.find("tenant_names")->value, "3 cgroups");
  EXPECT_NE(rep.find("tenant_names")->detail.find("no container or pod cgroup on this host"),
            std::string::npos);
}

}  // namespace
}  // namespace ingero::app
