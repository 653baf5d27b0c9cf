// NVML in a process of its own (hal/sampler_process.h): the tracer runs its own executable with
// this hidden command, and a libnvidia-ml that crashes or hangs takes only that process down.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ingero::backends::nvml {

inline constexpr const char* kSamplerCommand = "__nvml-sampler";

// The child's command line: `exe __nvml-sampler LIBRARY POLL_NS PARENT_PID`. The child dies
// with the thread that starts it (PR_SET_PDEATHSIG): the tracer's main thread, `check`'s.
std::vector<std::string> sampler_argv(const std::string& exe, const std::string& library,
                                      int64_t poll_ns);

// The child's main, given the arguments after the command: opens NVML and answers on fd 3.
int sampler_main(int argc, char** argv);

}  // namespace ingero::backends::nvml
