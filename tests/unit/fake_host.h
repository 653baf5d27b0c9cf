// A fake host for the tenant tests: proc/, a cgroup v2 hierarchy whose directories' inodes are
// the cgroup ids, and a containerd state root, under a test's scratch directory.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernelside/tenant_names.h"
#include "tests/support/trace_db.h"

namespace ingero::test {

inline const std::string kId = "9b1c2d3e4f5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
inline const std::string kUid = "3f2a1b2c-4d5e-4f70-8192-a3b4c5d6e7f8";
inline const std::string kPodPath =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod3f2a1b2c_4d5e_4f70_8192_"
    "a3b4c5d6e7f8.slice";
inline const std::string kScope = kPodPath + "/cri-containerd-" + kId + ".scope";

inline void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A host: proc/, cgroup/ (the v2 mount) and state/ (a containerd root).
class FakeHost {
 public:
  FakeHost() : dir_(test::temp_path("host")) {
    put(proc("1/ns/uts"), "host");
    put(proc("self/ns/uts"), "host");
  }
  std::string proc(const std::string& rel = "") const { return dir_ + "/proc/" + rel; }
  std::string cg(const std::string& rel = "") const { return dir_ + "/cgroup" + rel; }
  std::string state() const { return dir_ + "/state"; }
  kernelside::TenantSources sources() const {
    kernelside::TenantSources s;
    s.proc = dir_ + "/proc";
    s.cgroup_root = cg();
    s.runtime_roots = {state()};
    return s;
  }
  // A cgroup directory; its id is its inode.
  uint64_t cgroup(const std::string& path) const {
    std::filesystem::create_directories(cg(path));
    struct stat st {};
    EXPECT_EQ(stat(cg(path).c_str(), &st), 0);
    return st.st_ino;
  }
  // Process `pid` in cgroup `path`, with its environment and a UTS namespace of its own.
  void process(uint32_t pid, const std::string& path, const std::string& environ,
               bool own_uts = true) const {
    std::string p = std::to_string(pid) + "/";
    put(proc(p + "cgroup"), "4:memory:/elsewhere\n0::" + path + "\n");
    put(proc(p + "environ"), environ);
    if (own_uts) {
      put(proc(p + "ns/uts"), "own");
    } else {
      std::filesystem::create_directories(proc(p + "ns"));
      std::filesystem::create_hard_link(proc("1/ns/uts"), proc(p + "ns/uts"));
    }
    std::filesystem::create_directories(proc(p + "root"));
  }
  // The pod's service account file inside the process's root, behind Debian's absolute
  // /var/run -> /run symlink (resolved in the container, not on this host).
  void service_account(uint32_t pid, const std::string& ns) const {
    std::string root = proc(std::to_string(pid) + "/root");
    std::filesystem::create_directories(root + "/var");
    std::filesystem::create_directory_symlink("/run", root + "/var/run");
    put(root + "/run/secrets/kubernetes.io/serviceaccount/namespace", ns + "\n");
  }
  void containerd_state(const std::string& id, const std::string& annotations) const {
    put(state() + "/io.containerd.runtime.v2.task/k8s.io/" + id + "/config.json",
        R"({"ociVersion":"1.1.0","annotations":{)" + annotations + "}}");
  }

 private:
  std::string dir_;
};

}  // namespace ingero::test
