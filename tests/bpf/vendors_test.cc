// AMD HIP, NCCL and a mixed-vendor trace, on the real libraries; the HIP flavour of the
// planted CPU-contention fault; InfiniBand counters from a fake sysfs tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"
#include "tests/bpf/cuda_workload.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kHip = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const char* kNccl = INGERO_CUDA_ROOT "/lib64/libnccl.so.2";

// "<op> <tid> <ret>" lines -> op -> (count, ret)
std::map<std::string, std::pair<int, int>> calls_by_op(const std::string& out, int* pid) {
  std::map<std::string, std::pair<int, int>> m;
  for (const auto& l : parse_workload(out, pid)) {
    m[l.op].first++;
    m[l.op].second = l.ret;
  }
  return m;
}

TEST(Vendors, HipRealLibraryExactCallsAndDecode) {
  REQUIRE_BPF();
  REQUIRE_FILE(kHip);
  std::string db = temp_path("hip.db");
  // Every launch timed, so that each has its return code (by default one in 32 per thread).
  auto run = trace_command(db, {INGERO_HIP_CALLS, kHip}, {"--launch-timing", "1"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto want = calls_by_op(run.out, &pid);
  ASSERT_EQ(want.size(), 8u) << run.out;
  for (const auto& [op, cr] : want) {
    auto rows = query_rows(
        db, "SELECT count(*), min(ret), max(ret), min(vendor), min(api) FROM calls WHERE op = '" +
                op + "' AND pid = " + std::to_string(pid));
    EXPECT_EQ(rows[0],
              (std::vector<std::string>{std::to_string(cr.first), std::to_string(cr.second),
                                        std::to_string(cr.second), "amd", "hip"}))
        << op;
  }
  EXPECT_EQ(query_rows(db,
                       "SELECT group_concat(bytes) FROM (SELECT bytes FROM hip_events WHERE op = "
                       "'hipMalloc' ORDER BY ts_ns)")[0][0],
            "2048,4096,6144");
  EXPECT_EQ(query_rows(db,
                       "SELECT DISTINCT func, grid_x, grid_y, grid_z, block_x, block_y, block_z, "
                       "shared_mem, stream "
                       "FROM hip_events WHERE op = 'hipLaunchKernel'"),
            (std::vector<std::vector<std::string>>{{std::to_string(0xabc0), "32", "2", "1", "64",
                                                    "1", "1", "128", std::to_string(0xa11)}}));
  EXPECT_EQ(
      query_rows(
          db,
          "SELECT func, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem, stream "
          "FROM hip_events WHERE op = 'hipModuleLaunchKernel'")[0],
      (std::vector<std::string>{std::to_string(0xdef0), "7", "8", "9", "10", "11", "12", "64",
                                std::to_string(0xa22)}));
  EXPECT_EQ(query_rows(db,
                       "SELECT op, bytes, direction, coalesce(stream, 0) FROM hip_events WHERE "
                       "kind = 'memcpy' GROUP BY 1, 2, 3, 4 ORDER BY 1"),
            (std::vector<std::vector<std::string>>{
                {"hipMemcpy", "65536", "H2D", "0"},
                {"hipMemcpyAsync", "4096", "D2H", std::to_string(0xa11)}}));
  // Without a GPU libamdhip64 answers every call hipErrorInvalidDevice: the process could not
  // use a GPU (it read "GPU calls were made with invalid arguments: check the arguments").
  std::string text, err;
  ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db}, &text, &err), 0) << err;
  EXPECT_NE(text.find("could not use a GPU"), std::string::npos) << text;
  EXPECT_NE(text.find("hipErrorInvalidDevice (101)"), std::string::npos) << text;
  EXPECT_EQ(text.find("invalid arguments"), std::string::npos) << text;
}

// The calls PyTorch on ROCm and per-thread-stream programs make went untraced without a word:
// hipMemcpyWithStream (every .item() and .cpu()), hipMemcpyPeer, hipLaunchCooperativeKernel,
// and the _spt twins of launch, copy and sync. Each is one row, the _spt twins under their
// base names, with their arguments.
TEST(Vendors, HipCopiesWithStreamPeerCooperativeAndPerThreadStream) {
  REQUIRE_BPF();
  REQUIRE_FILE(kHip);
  std::string db = temp_path("hip-more.db");
  auto run = trace_command(db, {INGERO_HIP_CALLS, kHip, "more"}, {"--launch-timing", "1"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto want = calls_by_op(run.out, &pid);
  ASSERT_EQ(want.size(), 11u) << run.out;
  EXPECT_EQ(want["hipLaunchKernel"].first, 3);
  for (const auto& [op, cr] : want) {
    auto rows = query_rows(
        db, "SELECT count(*) FROM calls WHERE op = '" + op + "' AND pid = " + std::to_string(pid));
    EXPECT_EQ(rows[0][0], std::to_string(cr.first)) << op;
  }
  EXPECT_EQ(query_rows(db,
                       "SELECT op, bytes, direction, coalesce(stream, 0), coalesce(device, -1), "
                       "coalesce(peer, -1) FROM calls WHERE pid = " +
                           std::to_string(pid) +
                           " AND op IN ('hipMemcpyWithStream', "
                           "'hipMemcpyPeer') GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1"),
            (std::vector<std::vector<std::string>>{
                {"hipMemcpyPeer", "8192", "peer", "0", "1", "0"},
                {"hipMemcpyWithStream", "512", "D2H", std::to_string(0xa33), "-1", "-1"}}));
  EXPECT_EQ(
      query_rows(db, "SELECT func, grid_x, block_x, shared_mem, stream FROM calls WHERE pid = " +
                         std::to_string(pid) +
                         " AND "
                         "op = 'hipLaunchCooperativeKernel'"),
      (std::vector<std::vector<std::string>>{
          {std::to_string(0xabc8), "32", "64", "256", std::to_string(0xa33)}}));
  // The per-thread twins: the default stream (0), under the base names.
  EXPECT_EQ(
      query_rows(db, "SELECT op, count(*) FROM calls WHERE pid = " + std::to_string(pid) +
                         " AND coalesce(stream, 0) = 0 AND op "
                         "IN ('hipLaunchKernel', 'hipMemcpyAsync', 'hipStreamSynchronize') GROUP "
                         "BY op ORDER BY op"),
      (std::vector<std::vector<std::string>>{
          {"hipLaunchKernel", "1"}, {"hipMemcpyAsync", "1"}, {"hipStreamSynchronize", "1"}}));
}

// NCCL spells all-to-all ncclAlltoAll (RCCL ncclAllToAll): every one is traced, by its
// library's name, as the collective ALL_TO_ALL.
TEST(Vendors, NcclAllToAllIsTracedUnderTheLibrarysSpelling) {
  REQUIRE_BPF();
  REQUIRE_FILE(kNccl);
  std::string db = temp_path("nccl_a2a.db");
  auto run = trace_command(db, {INGERO_NCCL_CALLS, kNccl, "alltoall"});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto want = calls_by_op(run.out, &pid);
  ASSERT_EQ(want.size(), 1u) << run.out;
  ASSERT_EQ(want.begin()->first, "ncclAlltoAll") << run.out;
  EXPECT_EQ(want.begin()->second.first, 4);
  EXPECT_EQ(query_rows(db,
                       "SELECT op, api_op, count(*), count, datatype, bytes, stream FROM "
                       "nccl_events GROUP BY 1, 2"),
            (std::vector<std::vector<std::string>>{{"ALL_TO_ALL", "ncclAlltoAll", "4", "77",
                                                    "int32", "308", std::to_string(0x57ab)}}));
}

TEST(Vendors, NcclCollectivesStackStreamAndUniqueIdHash) {
  REQUIRE_BPF();
  REQUIRE_FILE(kNccl);
  std::string db = temp_path("nccl.db");
  auto run = trace_command(db, {INGERO_NCCL_CALLS, kNccl});
  ASSERT_EQ(run.rc, 0) << run.err;
  int pid = 0;
  auto want = calls_by_op(run.out, &pid);
  ASSERT_EQ(want.size(), 10u) << run.out;
  for (const auto& [op, cr] : want)
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM calls WHERE op = '" + op +
                                "' AND ret = " + std::to_string(cr.second)),
              cr.first)
        << op;
  using V = std::vector<std::string>;
  // count, datatype, bytes, reduce op, root/peer, and the stream (7th argument on the stack
  // for all-reduce, broadcast; 8th for reduce).
  EXPECT_EQ(
      query_rows(
          db,
          "SELECT op, count(*), count, datatype, bytes, reduce_op, peer, stream, vendor, api FROM "
          "nccl_events "
          "WHERE op NOT IN ('COMM_INIT', 'GROUP_START', 'GROUP_END') AND api_op <> 'ncclBcast' "
          "GROUP BY op ORDER BY op"),
      (std::vector<V>{{"ALL_GATHER", "1", "1024", "bfloat16", "2048", "NULL", "NULL",
                       std::to_string(0x57a7), "nvidia", "nccl"},
                      {"ALL_REDUCE", "3", "262144", "float32", "1048576", "sum", "NULL",
                       std::to_string(0x57a7), "nvidia", "nccl"},
                      {"BROADCAST", "1", "4096", "int64", "32768", "NULL", "1",
                       std::to_string(0x57a8), "nvidia", "nccl"},
                      {"RECV", "1", "512", "int8", "512", "NULL", "3", std::to_string(0x57aa),
                       "nvidia", "nccl"},
                      {"REDUCE", "1", "100", "float64", "800", "max", "3", std::to_string(0x57a9),
                       "nvidia", "nccl"},
                      {"SEND", "1", "512", "int8", "512", "NULL", "1", std::to_string(0x57aa),
                       "nvidia", "nccl"}}));
  // ncclBcast calls ncclBroadcast inside the library: each is one broadcast, with the inner
  // call folded into it (not two broadcasts).
  EXPECT_EQ(query_rows(db,
                       "SELECT count(*), sum(nested_calls), min(nested_op), min(count) FROM calls "
                       "WHERE op = 'ncclBcast'")[0],
            (V{"2", "2", "ncclBroadcast", "2048"}));
  EXPECT_EQ(query_int(db, "SELECT count(*) FROM nccl_events WHERE op = 'BROADCAST'"), 3);
  // ncclCommInitRank: rank from the register after the by-value id, and the 128 id bytes
  // folded with splitmix64, checked against an independent implementation.
  auto pos = run.out.find("\nid ");
  ASSERT_NE(pos, std::string::npos);
  std::string hex = run.out.substr(pos + 4, 256);
  std::string py =
      "import struct\n"
      "b = bytes.fromhex('" +
      hex +
      "')\n"
      "M = (1 << 64) - 1\n"
      "def sm(x):\n"
      "    x = (x + 0x9e3779b97f4a7c15) & M\n"
      "    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M\n"
      "    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M\n"
      "    return x ^ (x >> 31)\n"
      "h = 0\n"
      "for (w,) in struct.iter_unpack('<Q', b):\n"
      "    h = sm(h ^ w)\n"
      "print(h - (1 << 64) if h >= 1 << 63 else h)\n";
  std::string expected;
  ASSERT_EQ(run_command({"python3", "-c", py}, &expected), 0);
  expected.pop_back();
  EXPECT_EQ(query_rows(
                db, "SELECT rank, nranks, comm_id_hash FROM nccl_events WHERE op = 'COMM_INIT'")[0],
            (V{"2", "4", expected}));
}

TEST(Vendors, MixedCudaHipNcclInOneTrace) {
  REQUIRE_BPF();
  REQUIRE_FILE(kHip);
  REQUIRE_FILE(kNccl);
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  std::string db = temp_path("mixed.db");
  std::string script = std::string(INGERO_CUDA_CALLS) + " " + kStub + " & " + INGERO_HIP_CALLS +
                       " " + kHip + " & " + INGERO_NCCL_CALLS + " " + kNccl + " & wait";
  auto run = trace_command(db, {"/bin/sh", "-c", script});
  ASSERT_EQ(run.rc, 0) << run.err;
  using V = std::vector<std::string>;
  EXPECT_EQ(
      query_rows(db, "SELECT vendor, api, kind, count(*) FROM calls GROUP BY 1,2,3 ORDER BY 1,2,3"),
      (std::vector<V>{{"amd", "hip", "alloc", "3"},
                      {"amd", "hip", "free", "1"},
                      {"amd", "hip", "launch", "3"},
                      {"amd", "hip", "memcpy", "3"},
                      {"amd", "hip", "sync", "3"},
                      {"nvidia", "cuda_driver", "alloc", "2"},
                      {"nvidia", "cuda_driver", "launch", "3"},
                      {"nvidia", "cuda_driver", "memcpy", "1"},
                      {"nvidia", "cuda_driver", "sync", "2"},
                      {"nvidia", "cuda_runtime", "alloc", "7"},
                      {"nvidia", "cuda_runtime", "free", "7"},
                      {"nvidia", "cuda_runtime", "graph_capture", "1"},
                      {"nvidia", "cuda_runtime", "graph_end_capture", "1"},
                      {"nvidia", "cuda_runtime", "graph_instantiate", "1"},
                      {"nvidia", "cuda_runtime", "graph_launch", "1"},
                      {"nvidia", "cuda_runtime", "launch", "5"},
                      {"nvidia", "cuda_runtime", "memcpy", "6"},
                      {"nvidia", "cuda_runtime", "memset", "1"},
                      {"nvidia", "cuda_runtime", "sync", "9"},
                      {"nvidia", "nccl", "collective", "8"},
                      {"nvidia", "nccl", "comm_init", "1"},
                      {"nvidia", "nccl", "group", "2"},
                      {"nvidia", "nccl", "p2p", "2"}}));
}

TEST(Vendors, HipFlavouredPlantedFaultGivesTheSameChain) {
  REQUIRE_BPF();
  std::map<std::string, nlohmann::json> chain;
  for (std::string api : {"cuda", "hip"}) {
    std::string db = temp_path(api + ".db");
    std::string lib = api == "hip" ? INGERO_FAKE_HIP : INGERO_FAKE_CUDART;
    // Both at nice -20: they share CPU 1 between them, whatever else the machine runs.
    std::string script = std::string("nice -n -20 ") + INGERO_CPU_HOG + " 1 6 & nice -n -20 " +
                         INGERO_FAKE_CALLS + " steps " + lib + " 800 1 " + api + "; wait";
    // The tracer on CPU 0, out of the way: the loop and the hog share CPU 1 alone.
    auto run =
        trace_command_on_cpu0(db, {"/bin/sh", "-c", script}, {},
                              {"VIRTUAL_ENV=" INGERO_FAKE_VENV, "CUDA_HOME=" INGERO_FAKE_CUDA_HOME,
                               "ROCM_PATH=" INGERO_FAKE_ROCM, "INGERO_FAKE_SYNC_SPIN_US=2000"});
    ASSERT_EQ(run.rc, 0) << run.err;
    std::string out;
    ASSERT_EQ(run_command({INGERO_BIN, "explain", "--db", db, "--json"}, &out), 0);
    auto report = nlohmann::json::parse(out);
    // The call-level chain of the spinning sync (it lost its CPU), not the step-level one. The
    // launches may lose their CPU too and have chains of their own: pick the sync's by its op.
    std::string sync = api + "StreamSynchronize";
    for (const auto& c : report["chains"])
      if (c["rule"] == "cpu_contention" && c["op"] == sync &&
          c["id"].get<std::string>().rfind("cpu_contention:steps:", 0) != 0)
        chain[api] = c;
    ASSERT_TRUE(chain.count(api)) << api << ":\n" << out << "\n" << run.err;
  }
  EXPECT_EQ(chain["cuda"]["vendor"], "nvidia");
  EXPECT_EQ(chain["hip"]["vendor"], "amd");
  // The same diagnosis: the rule, the culprit, and a host cause found (never LOW). How much CPU
  // the sync lost is measured anew in each run, so MEDIUM against HIGH is not a difference.
  for (const std::string api : {"cuda", "hip"}) {
    EXPECT_NE(chain[api]["summary"].get<std::string>().find("by noisy_neighbor"), std::string::npos)
        << chain[api].dump();
    EXPECT_NE(chain[api]["severity"], "LOW") << chain[api].dump();
  }
  std::vector<std::string> layers;
  for (const auto& t : chain["hip"]["timeline"]) layers.push_back(t["layer"]);
  EXPECT_EQ(layers.back(), "HIP");
}

TEST(Vendors, InfinibandCountersFromAFakeSysfsTree) {
  REQUIRE_BPF();
  std::string root = temp_path("sys");
  std::string port = root + "/class/infiniband/mlx5_0/ports/1";
  std::filesystem::create_directories(port + "/counters");
  std::filesystem::create_directories(port + "/hw_counters");
  std::ofstream(port + "/link_layer") << "InfiniBand\n";
  std::ofstream(port + "/state") << "4: ACTIVE\n";
  std::ofstream(port + "/rate") << "200 Gb/sec (4X HDR)\n";
  std::ofstream(port + "/counters/port_rcv_data") << "1000\n";
  std::ofstream(port + "/counters/port_rcv_errors") << "3\n";
  std::ofstream(port + "/hw_counters/out_of_buffer") << "7\n";
  std::string db = temp_path("ib.db");
  auto run = trace_command(db, {"/bin/true"}, {"--sysfs-root", root});
  ASSERT_EQ(run.rc, 0) << run.err;
  using V = std::vector<std::string>;
  EXPECT_EQ(
      query_rows(db,
                 "SELECT DISTINCT device, port, transport, state, counter, value, base_value, "
                 "unit, is_error "
                 "FROM rdma_counters ORDER BY counter"),
      (std::vector<V>{
          {"mlx5_0", "1", "InfiniBand", "4: ACTIVE", "hw_counters/out_of_buffer", "7", "7",
           "events", "1"},
          {"mlx5_0", "1", "InfiniBand", "4: ACTIVE", "port_rcv_data", "1000", "4000", "bytes", "0"},
          {"mlx5_0", "1", "InfiniBand", "4: ACTIVE", "port_rcv_errors", "3", "3", "events", "1"}}));
}

}  // namespace
}  // namespace ingero::test
