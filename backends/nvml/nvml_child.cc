#include "backends/nvml/nvml_child.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>

#include "backends/nvml/crash_note.h"
#include "backends/nvml/nvml_sampler.h"
#include "hal/sampler_process.h"

namespace ingero::backends::nvml {

std::vector<std::string> sampler_argv(const std::string& exe, const std::string& library,
                                      int64_t poll_ns) {
  return {exe, kSamplerCommand, library, std::to_string(poll_ns), std::to_string(getpid())};
}

int sampler_main(int argc, char** argv) {
  if (argc != 3) return 2;
  prctl(PR_SET_NAME, "ingero-nvml");  // as ps and top show it (its path is /proc/self/exe)
  // Gone with the tracer, even one killed while this process is inside the driver (it would
  // otherwise read its socket's end only when the driver lets it go).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != pid_t(std::strtol(argv[2], nullptr, 10))) return 1;  // it died already
  hal::DeviceSamplerOptions o;
  o.nvml_library = argv[0];
  o.poll_ns = std::strtoll(argv[1], nullptr, 10);
  // The tracer says what happened when this process dies; the in-process words ("it takes the
  // process with it") would be wrong here.
  CrashNote::silence();
  return hal::serve_sampler(3, [&o]() -> Result<std::unique_ptr<hal::DeviceSampler>> {
    auto s = NvmlSampler::open(o);
    if (!s) return s.error();
    return std::unique_ptr<hal::DeviceSampler>(std::move(*s));
  });
}

}  // namespace ingero::backends::nvml
