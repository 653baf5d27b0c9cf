// Names of native frames, without reading any file: C++ demangling and whether a path is one
// of the system's or a vendor's libraries. The symbolizer (probe/symbolizer.h, libdwfl) uses
// them too; the engine, the store and the exporters need only these.
#pragma once

#include <string>
#include <string_view>

namespace ingero::hal {

// A file of the system's or a vendor's libraries (/lib, /usr/lib, /usr/local/cuda, /opt/rocm),
// or the CPython interpreter wherever it is installed (python3.X or libpython3.X.so under
// pyenv, conda, /opt): its frames are named by their functions, without source lines. Reading
// a line decompresses the module's DWARF and keeps it: libc's debug package alone costs
// ~10 MiB, a pyenv-built libpython's ~19 MiB, held for the whole session, and no explanation
// points into these files (an interpreter's C frames sit under the Python frames that say
// where the user's code is).
bool system_library(std::string_view path);

// Code a device compiler put into the program around a kernel launch, not the user's: the
// runtime headers' launch helpers (a frame whose source is a system or vendor file, as
// system_library() knows them: `__cudaLaunchKernel_helper` at .../cuda/include/...), the stubs
// nvcc writes (`*.stub.c`, `__device_stub__*`, `__wrapper__device_stub_*`) and clang's for CUDA
// and HIP (`__device_stub__*`). Where a launch comes from skips them: every nvcc-built program's
// launches read "from __cudaLaunchKernel_helper (device_functions.h:2963)".
bool generated_launch_frame(std::string_view function, std::string_view file);

// "_ZN3foo3barEv" -> "foo::bar()", keeping "+0x1f" and ".isra.0" suffixes; anything else
// unchanged. A name whose demangled form would pass kMaxDemangled bytes stays as it is: a
// 197-byte symbol of nested templates demangled to 109 MB (1.8 GB of the tracer's memory, 70 s,
// and a trace whose kernel names every query refused as too big). The demangler writes into a
// bounded buffer and stops there, so such a name costs microseconds.
inline constexpr size_t kMaxDemangled = 64 << 10;
std::string demangle(const std::string& name);

}  // namespace ingero::hal
