// `ingero export --format pprof` of a real trace: Debian's python3.11 waiting in the real
// libcudart's cudaStreamSynchronize from a known line, then running on the CPU in a known
// function. Read back by `go tool pprof` (golang-go): every sample type's total equals
// `ingero query` over the same file, the gpu_wait top is the sync called from that line, and
// the on-CPU samples are in that function.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test_paths.h"
#include "tests/support/pprof_tool.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

const char* kCudart = INGERO_CUDA_ROOT "/lib64/libcudart.so.13";

// go tool pprof -traces: each trace's value and frames (leaf first), for one sample type.
struct Trace {
  double value = 0;  // as printed, in the unit pprof chose
  std::vector<std::string> frames;
};
std::vector<Trace> traces(const std::string& file, const std::string& type) {
  std::istringstream in(run_ok({INGERO_GO, "tool", "pprof", "-traces", "-lines", "-symbolize=none",
                                "-sample_index=" + type, file},
                               {"HOME=" + scratch_root()}));
  std::vector<Trace> out;
  bool in_trace = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("-----------+", 0) == 0) {
      out.emplace_back();
      in_trace = true;
      continue;
    }
    size_t colon = line.find(':');
    if (!in_trace || (colon != std::string::npos && colon < 11) || line.size() < 13)
      continue;  // a label line ("       pid:  4242")
    std::string head = line.substr(0, 11), frame = line.substr(13);
    if (head.find_first_not_of(' ') != std::string::npos) {
      // "218.10us", "1.50s", "40": pprof scales each value on its own; back to ns.
      std::string v = head.substr(head.find_first_not_of(' '));
      size_t end = 0;
      double x = std::stod(v, &end);
      std::string unit = v.substr(end);
      while (!unit.empty() && unit.back() == ' ') unit.pop_back();
      double scale = unit == "us" ? 1e3 : unit == "ms" ? 1e6 : unit == "s" ? 1e9 : 1;
      out.back().value = x * scale;
    }
    out.back().frames.push_back(frame);
  }
  return out;
}

TEST(PprofTrace, APythonSyncLoopsGpuWaitAndCpuByTheirLines) {
  REQUIRE_BPF();
  REQUIRE_FILE(kCudart);
  if (access("/usr/bin/python3.11", X_OK) != 0 || access(INGERO_GO, X_OK) != 0) {
    if (running_in_ci()) FAIL() << "CI=true but python3.11 or go (golang-go) is missing";
    GTEST_SKIP() << "*** SKIPPED: needs /usr/bin/python3.11 and go (golang-go) ***";
  }
  std::string db = temp_path("sync.db");
  auto run = trace_command(db, {"/usr/bin/python3.11", INGERO_SYNC_LOOP_PY, kCudart, "200", "1.5"});
  ASSERT_EQ(run.rc, 0) << run.err;
  std::map<std::string, std::string> k;
  std::istringstream lines(run.out);
  for (std::string l; std::getline(lines, l);) {
    std::istringstream ls(l);
    std::string a, b;
    if (ls >> a >> b) k[a] = b;
  }
  ASSERT_FALSE(k["sync_line"].empty()) << run.out;
  std::string out = temp_path("sync.pb.gz");
  run_ok({INGERO_BIN, "export", "--format", "pprof", "--db", db, "-o", out});
  const int64_t period = 1'000'000'000 / 49;  // the default --cpu-sample-hz, in the flags
  EXPECT_EQ(query_rows(db, "SELECT flags LIKE '%cpu-sample-hz=49%' FROM sessions")[0][0], "1");
  const PprofTotals want = pprof_expected_totals(db);
  EXPECT_EQ(query_one(db, "SELECT count(*) FROM calls WHERE op = 'cudaStreamSynchronize'"), 200);
  EXPECT_GT(want.samples, 0);
  EXPECT_EQ(pprof_raw_totals(out), want.values(period));

  // gpu_wait: one trace, the sync called from the planted line, main and the module below.
  const std::string script = INGERO_SYNC_LOOP_PY;
  auto waits_by = traces(out, "gpu_wait");
  std::vector<Trace> nonzero;
  for (const auto& t : waits_by)
    if (t.value > 0) nonzero.push_back(t);
  ASSERT_EQ(nonzero.size(), 1u);
  const auto& f = nonzero[0].frames;
  ASSERT_GE(f.size(), 3u);
  EXPECT_EQ(f[0], "cudaStreamSynchronize");
  std::vector<std::string> python;
  for (const auto& fr : f)
    if (fr.find(script) != std::string::npos) python.push_back(fr);
  ASSERT_GE(python.size(), 2u) << ::testing::PrintToString(f);
  EXPECT_EQ(python[0], "wait_for_gpu " + script + ":" + k["sync_line"]);
  EXPECT_EQ(python[1].rfind("main " + script + ":", 0), 0u) << python[1];
  std::string top =
      run_ok({INGERO_GO, "tool", "pprof", "-top", "-symbolize=none", "-sample_index=gpu_wait", out},
             {"HOME=" + scratch_root()});
  EXPECT_NE(top.find("100%   100%"), std::string::npos) << top;
  EXPECT_NE(top.find("cudaStreamSynchronize"), std::string::npos) << top;

  // cpu: most samples are inside spin() at its loop line (others: the sync loop, the exit).
  double in_spin = 0, all = 0;
  for (const auto& t : traces(out, "cpu")) {
    all += t.value;
    for (const auto& fr : t.frames)
      if (fr == "spin " + script + ":" + k["spin_line"]) {
        in_spin += t.value;
        break;
      }
  }
  EXPECT_GT(all, 0);
  EXPECT_GE(in_spin, 0.5 * all) << in_spin << " of " << all;
}

}  // namespace
}  // namespace ingero::test
