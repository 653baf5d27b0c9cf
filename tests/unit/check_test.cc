// `ingero check` host checks on fixture inputs: a fake root with proc/, sys/, dev/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/builtin_backends.h"
#include "app/check_items.h"
#include "tests/support/trace_db.h"

namespace ingero::app {
namespace {

void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
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

}  // namespace
}  // namespace ingero::app
