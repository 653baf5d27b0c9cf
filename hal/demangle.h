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

// "_ZN3foo3barEv" -> "foo::bar()", keeping "+0x1f" and ".isra.0" suffixes; anything else
// unchanged.
std::string demangle(const std::string& name);

}  // namespace ingero::hal
