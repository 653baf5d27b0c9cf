// What the BPF tests of the CUDA libraries share: the toolkit's driver stub, the stand-in
// runtime's environment, and the workloads' "<op> <tid> <ret>" lines.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "test_paths.h"

namespace ingero::test {

inline const char* kStub = INGERO_CUDA_ROOT "/lib64/stubs/libcuda.so";
// With these, ingero discovers the fake runtime (a pip-wheel layout under VIRTUAL_ENV) and the
// fake driver (CUDA_HOME/lib64) at start-up, before the workload loads them.
inline const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                                  "CUDA_HOME=" INGERO_FAKE_CUDA_HOME};

struct WorkloadLine {
  std::string op;
  int tid;
  int ret;
};

// Parses "<op> <tid> <ret>" lines and "pid <n>".
inline std::vector<WorkloadLine> parse_workload(const std::string& out, int* pid) {
  std::vector<WorkloadLine> v;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string op;
    ls >> op;
    if (op == "pid") {
      ls >> *pid;
      continue;
    }
    WorkloadLine w{op, 0, 0};
    if (ls >> w.tid >> w.ret) v.push_back(w);
  }
  return v;
}

}  // namespace ingero::test
