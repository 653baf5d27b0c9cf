// Library discovery through the HostView seam: a fake /proc over real files.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backends/cuda/cuda_backend.h"
#include "probe/library_discovery.h"
#include "probe/probe_manager.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::hal {
namespace {

namespace fs = std::filesystem;

// A fake host: /proc lives under a temp dir; files are real so identities are real.
class FakeHost : public LocalHost {
 public:
  explicit FakeHost(std::string proc) : LocalHost(proc), proc_(proc) {}
  std::vector<int> pids() const override { return pids_; }
  std::string env(const char* n) const override {
    auto it = env_.find(n);
    return it == env_.end() ? "" : it->second;
  }
  Result<std::string> readlink(const std::string& p) const override {
    auto it = links_.find(p);
    if (it == links_.end()) return make_error("no link");
    return it->second;
  }
  std::vector<int> pids_;
  std::map<std::string, std::string> env_, links_;
  std::string proc_;
};

// What discovery finds of the libcudart files pid 100 maps, under ROOT/proc.
std::vector<DiscoveredFile> scan_process_100(const std::string& root) {
  FakeHost host(root + "/proc");
  host.pids_ = {100};
  DiscoveryOptions o;
  o.hints = {"libcudart"};
  o.ld_cache = root + "/none";
  LibraryDiscovery d(host, o);
  return d.scan_all();
}

// A process whose main thread ended with pthread_exit runs on in its other threads; its own maps
// read empty, a live thread's do not (helper-75: a library its worker loaded was never
// attached, 0 of 5 calls).
TEST(Discovery, AProcessWhoseMainThreadEndedIsReadThroughALiveThread) {
  std::string root = test::temp_path("host");
  fs::create_directories(root + "/proc/100/task/100");
  fs::create_directories(root + "/proc/100/task/101/root/opt");
  fs::copy_file(INGERO_FAKE_CUDART, root + "/proc/100/task/101/root/opt/libcudart.so.13");
  std::ofstream(root + "/proc/100/maps") << "";
  std::ofstream(root + "/proc/100/task/100/maps") << "";
  std::ofstream(root + "/proc/100/task/101/maps")
      << "7f0000000000-7f0000001000 r-xp 00001000 fd:01 1 /opt/libcudart.so.13\n";
  auto files = scan_process_100(root);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].display_path, "/opt/libcudart.so.13");
  EXPECT_EQ(files[0].path, root + "/proc/100/task/101/root/opt/libcudart.so.13");
  EXPECT_EQ(files[0].pids, (std::set<int>{100}));
}

// The file a mapping's path names from here is not the one mapped (a chroot, another copy bind-
// mounted over the path in a private mount namespace, a tmpfs of its own): the mapped one is
// reached through map_files. helper-75: each went untraced, 0 of 7 calls, without a word.
TEST(Discovery, AMappedFileThatIsNotTheOneItsPathNamesIsReachedThroughMapFiles) {
  std::string root = test::temp_path("host");
  fs::create_directories(root + "/proc/100/root/opt");
  fs::create_directories(root + "/proc/100/map_files");
  fs::create_directories(root + "/elsewhere");
  fs::copy_file(INGERO_FAKE_CUDART, root + "/proc/100/root/opt/libcudart.so.13");
  fs::copy_file(INGERO_FAKE_CUDART, root + "/elsewhere/libcudart.so.13");
  fs::create_symlink(root + "/elsewhere/libcudart.so.13",
                     root + "/proc/100/map_files/7f0000000000-7f0000001000");
  struct stat mapped {};
  ASSERT_EQ(::stat((root + "/elsewhere/libcudart.so.13").c_str(), &mapped), 0);
  std::ofstream(root + "/proc/100/maps") << "7f0000000000-7f0000001000 r-xp 00001000 fd:01 "
                                         << mapped.st_ino << " /opt/libcudart.so.13\n";
  auto files = scan_process_100(root);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].path, root + "/proc/100/map_files/7f0000000000-7f0000001000");
  EXPECT_EQ(files[0].display_path, "/opt/libcudart.so.13");
  EXPECT_EQ(files[0].id.ino, uint64_t(mapped.st_ino));
}

TEST(Discovery, FindsMappedFilesThroughProcRootDedupedByInode) {
  std::string root = test::temp_path("host");
  fs::create_directories(root + "/proc/100/root/opt/wheel");
  fs::create_directories(root + "/proc/200/root/opt/wheel");
  // One real file, reached as two paths (a container bind mount and a symlink).
  fs::copy_file(INGERO_FAKE_CUDART, root + "/proc/100/root/opt/wheel/libcudart.so.13");
  fs::create_symlink(root + "/proc/100/root/opt/wheel/libcudart.so.13",
                     root + "/proc/200/root/opt/wheel/libcudart.so.13");
  std::ofstream(root + "/proc/100/maps")
      << "7f0000000000-7f0000001000 r-xp 00001000 fd:01 1 /opt/wheel/libcudart.so.13\n"
         "7f0000002000-7f0000003000 r-xp 00001000 fd:01 2 /usr/lib/libnotinteresting.so\n";
  std::ofstream(root + "/proc/200/maps")
      << "7f0000000000-7f0000001000 r-xp 00001000 fd:01 1 /opt/wheel/libcudart.so.13\n";
  FakeHost host(root + "/proc");
  host.pids_ = {100, 200, 300 /* exited: no maps */};
  DiscoveryOptions o;
  o.hints = {"libcudart"};
  o.ld_cache = root + "/none";
  LibraryDiscovery d(host, o);
  auto files = d.scan_all();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].display_path, "/opt/wheel/libcudart.so.13");
  EXPECT_EQ(files[0].pids, (std::set<int>{100, 200}));
  EXPECT_EQ(files[0].sources, (std::set<std::string>{"maps"}));
  EXPECT_EQ(files[0].path.rfind(root + "/proc/", 0), 0u) << files[0].path;
}

// A trace filtered by pid reads only its processes' maps.
TEST(Discovery, OnlyTheProcessesGivenAreRead) {
  std::string root = test::temp_path("host-only");
  for (const char* pid : {"100", "200"}) {
    fs::create_directories(root + "/proc/" + pid + "/root/opt/" + pid);
    fs::copy_file(INGERO_FAKE_CUDART,
                  root + "/proc/" + pid + "/root/opt/" + pid + "/libcudart.so.13",
                  fs::copy_options::overwrite_existing);
    std::ofstream(root + "/proc/" + pid + "/maps")
        << "7f0000000000-7f0000001000 r-xp 00001000 fd:01 1 /opt/" << pid << "/libcudart.so.13\n";
  }
  FakeHost host(root + "/proc");
  host.pids_ = {100, 200};
  DiscoveryOptions o;
  o.hints = {"libcudart"};
  o.ld_cache = root + "/none";
  LibraryDiscovery d(host, o);
  std::vector<int> only = {200};
  auto files = d.scan_all(&only);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].display_path, "/opt/200/libcudart.so.13");
  EXPECT_EQ(files[0].pids, (std::set<int>{200}));
  EXPECT_EQ(d.scan_all().size(), 2u);  // every process
}

TEST(Discovery, InstallDirsFromEnvironmentAndPipWheelLayouts) {
  std::string root = test::temp_path("cudahome");
  fs::create_directories(root + "/lib64");
  fs::copy_file(INGERO_FAKE_CUDART, root + "/lib64/libcudart.so.13");
  fs::create_directories(root + "/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib");
  fs::copy_file(
      INGERO_FAKE_CUDART,
      root + "/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13");
  FakeHost host(root + "/proc");
  host.env_["CUDA_HOME"] = root;
  host.env_["VIRTUAL_ENV"] = root + "/venv";
  auto cuda = backends::make_cuda_backend();
  ProbeManager pm(nullptr, {cuda.get()}, host);
  pm.scan_all();
  std::set<std::string> paths;
  for (const auto& l : pm.libraries()) paths.insert(l.path);
  EXPECT_TRUE(paths.count(root + "/lib64/libcudart.so.13"));
  EXPECT_TRUE(paths.count(
      root + "/venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13"));
  for (const auto& l : pm.libraries()) {
    if (l.path.rfind(root, 0) != 0) continue;
    EXPECT_EQ(l.api, "cuda_runtime");
    // The fake defines 11 of the 26 runtime functions (7 calls + 4 graph functions).
    EXPECT_EQ(l.specs_resolved, 11u);
    EXPECT_EQ(l.missing_required.size(), 15u);
    EXPECT_EQ(l.sources, (std::set<std::string>{"install-dir"}));
  }
}

TEST(Discovery, UnparsableHintedFileIsAStatusNotACrash) {
  std::string root = test::temp_path("bad");
  fs::create_directories(root + "/lib64");
  std::ofstream(root + "/lib64/libcudart.so.13") << "this is not ELF";
  FakeHost host(root + "/proc");
  host.env_["CUDA_HOME"] = root;
  auto cuda = backends::make_cuda_backend();
  ProbeManager pm(nullptr, {cuda.get()}, host);
  pm.scan_all();
  bool seen = false;
  for (const auto& l : pm.libraries()) {
    if (l.path != root + "/lib64/libcudart.so.13") continue;
    seen = true;
    ASSERT_EQ(l.errors.size(), 1u);
    EXPECT_NE(l.errors[0].find("not an ELF file"), std::string::npos);
  }
  EXPECT_TRUE(seen);
}

// A host whose processes share its root, counting the identities looked up.
class CountingHost : public FakeHost {
 public:
  using FakeHost::FakeHost;
  Result<FileIdentity> identify(const std::string& path) const override {
    ++looked_up[path];
    if (fail_once.erase(path)) return make_error("EIO");
    // The processes' roots and ours are one directory.
    return LocalHost::identify(path == "/" ? proc_ + "/root" : path);
  }
  mutable std::map<std::string, int> looked_up;
  mutable std::set<std::string> fail_once;  // paths whose next look-up fails
};

// Process 100 of a fake /proc, in our own root, seen through a CountingHost.
struct OurRootProcess {
  static DiscoveryOptions options(const std::string& root) {
    DiscoveryOptions o;
    o.hints = {"libcudart"};
    o.ld_cache = root + "/none";
    return o;
  }
  explicit OurRootProcess(const std::string& name)
      : root(test::temp_path(name)), host(root + "/proc"), d(host, options(root)) {
    fs::create_directories(root + "/proc/100");
    fs::create_directories(root + "/proc/root");
    fs::create_directory_symlink(root + "/proc/root", root + "/proc/100/root");
  }
  void maps(const std::string& text) const { std::ofstream(root + "/proc/100/maps") << text; }
  std::string root;
  CountingHost host;
  LibraryDiscovery d;
};

const std::string kLoader = "/lib64/ld-linux-x86-64.so.2";

std::string loader_line(int inode) {
  return "7f0000000000-7f0000001000 r-xp 00001000 fd:01 " + std::to_string(inode) + " " + kLoader +
         "\n";
}

// A re-scan runs at every exec of the host on a host-wide trace: it hands back the maps it read
// (the stack collector's snapshot reads none of its own), looks our root up once, and a
// loader already identified by its mapping only again when the mapping is another file (an
// upgrade replaced it).
TEST(Discovery, AProcessReScannedLeavesItsMapsAndLooksUpLittle) {
  OurRootProcess p("rescan");
  const std::string sleep = "555500000000-555500001000 r-xp 00001000 fd:01 7 /usr/bin/sleep\n";
  p.maps(sleep + loader_line(11));
  std::vector<MapEntry> maps;
  p.d.scan_process(100, &maps);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(maps[0].path, "/usr/bin/sleep");
  EXPECT_EQ(maps[1].path, kLoader);
  EXPECT_EQ(maps[1].inode, 11u);
  p.d.scan_process(100, nullptr);
  EXPECT_EQ(p.host.looked_up["/"], 1);
  EXPECT_EQ(p.host.looked_up[kLoader], 1);
  EXPECT_EQ(p.host.looked_up[p.root + "/proc/100/root"], 2);  // each process's root, every time
  ASSERT_EQ(p.d.loaders().size(), 1u);
  p.maps(sleep + loader_line(12));  // replaced: another file at that path
  p.d.scan_process(100, nullptr);
  EXPECT_EQ(p.host.looked_up[kLoader], 2);
}

// A look-up that failed is not remembered: the next re-scan looks again, and finds.
TEST(Discovery, AFailedLookUpIsTriedAgain) {
  OurRootProcess p("rescan-fail");
  p.maps(loader_line(11));
  p.host.fail_once = {"/", kLoader};
  p.d.scan_process(100, nullptr);
  EXPECT_EQ(p.d.loaders().size(), 0u);
  p.d.scan_process(100, nullptr);
  p.d.scan_process(100, nullptr);
  EXPECT_EQ(p.host.looked_up["/"], 2);
  EXPECT_EQ(p.host.looked_up[kLoader], 2);
  ASSERT_EQ(p.d.loaders().size(), 1u);
  EXPECT_EQ(p.d.loaders()[0].path, kLoader);  // our root: the path as mapped
}

}  // namespace
}  // namespace ingero::hal
