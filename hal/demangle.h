// Names of native frames, without reading any file: C++ demangling and whether a path is one
// of the system's or a vendor's libraries. The symbolizer (probe/symbolizer.h, libdwfl) uses
// them too; the engine, the store and the exporters need only these.
#pragma once

#include <string>
#include <string_view>

namespace ingero::hal {

// A file of the system's or a vendor's libraries (/lib, /usr/lib, /usr/local/cuda, /opt/rocm):
// its frames are named by their functions, without source lines. Reading a line decompresses
// the module's DWARF and keeps it: libc's debug package alone costs ~10 MiB, held for the
// whole session, and no explanation points into these files.
bool system_library(std::string_view path);

// "_ZN3foo3barEv" -> "foo::bar()", keeping "+0x1f" and ".isra.0" suffixes; anything else
// unchanged.
std::string demangle(const std::string& name);

}  // namespace ingero::hal
