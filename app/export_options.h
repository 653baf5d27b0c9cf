// What `ingero export` was asked for (app/cmd_export.cc registers the command; each format has
// its own file: perfetto in export_perfetto.cc, pprof in export_pprof.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/window_spec.h"

namespace ingero::app {

struct ExportOpts {
  std::string format = "perfetto", db, out, source;
  bool force = false;
  engine::WindowSpec w;            // --since / --from / --to
  uint32_t pid = 0;                // --pid (0: every process)
  std::vector<std::string> nodes;  // --node (repeatable); empty: every node
};

// `ingero export --format pprof`: a gzip-compressed pprof profile (serve/export/pprof.h).
// Returns the exit code; errors are printed.
int run_pprof_export(const ExportOpts& o);

}  // namespace ingero::app
