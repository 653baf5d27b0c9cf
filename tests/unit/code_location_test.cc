// Where a launch comes from (engine/steps.h, code_location): the user's line, past what a device
// compiler put around the launch (hal/demangle.h, generated_launch_frame). helper-72: every
// nvcc-built program's kernels read "from __cudaLaunchKernel_helper (device_functions.h:2963)",
// in explain, the report and MCP get_kernels, while main at multi.cu:10 was in the stack.
#include <gtest/gtest.h>

#include "engine/steps.h"
#include "hal/demangle.h"

namespace ingero::engine {
namespace {

StackFrameInfo native(std::string function, std::string file, int64_t line, std::string module) {
  StackFrameInfo f;
  f.function = std::move(function);
  f.file = std::move(file);
  f.line = line;
  f.module = std::move(module);
  return f;
}

TEST(CodeLocation, ALaunchIsPlacedAtTheUsersLineNotTheCompilersStubs) {
  const std::string exe = "/home/u/multi";
  std::vector<StackFrameInfo> frames = {
      native("cudaLaunchKernel", "", 0, "/usr/local/cuda/lib64/libcudart.so.13"),
      native("__cudaLaunchKernel_helper(CUkern_st*, dim3, dim3, void**, unsigned long, "
             "CUstream_st*)",
             "/usr/local/cuda/bin/../targets/x86_64-linux/include/crt/device_functions.h", 2963,
             exe),
      native("__device_stub__Z6mykernPf(float*)",
             "/tmp/tmpxft_0001_00000000-6_multi.cudafe1.stub.c", 13, exe),
      native("mykern(float*)", "/tmp/tmpxft_0001_00000000-6_multi.cudafe1.stub.c", 14, exe),
      native("main", "/home/u/multi.cu", 10, exe),
  };
  EXPECT_EQ(code_location(frames), "main (multi.cu:10)");
  // Without line tables: the stubs by their names, and the host stub that bears the kernel's
  // name is what is left.
  for (auto& f : frames) f.file.clear();
  EXPECT_EQ(code_location(frames), "mykern(float*)");
}

TEST(CodeLocation, GeneratedLaunchFrames) {
  EXPECT_TRUE(hal::generated_launch_frame("__wrapper__device_stub_k(int*)", ""));
  EXPECT_TRUE(hal::generated_launch_frame("__device_stub__k(int*)", ""));
  EXPECT_TRUE(hal::generated_launch_frame("f", "/opt/rocm/include/hip/amd_detail/x.h"));
  EXPECT_FALSE(hal::generated_launch_frame("launch_all", "/home/u/train.cu"));
  EXPECT_FALSE(hal::generated_launch_frame("cuda_step", ""));
}

}  // namespace
}  // namespace ingero::engine
