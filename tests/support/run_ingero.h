// Runs the ingero binary under test with `args`: its exit code and what it printed.
#pragma once

#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/support/subprocess.h"

namespace ingero::test {

struct IngeroRun {
  int rc = -1;
  std::string out, err;
};

inline IngeroRun run_ingero(const std::vector<std::string>& args) {
  IngeroRun r;
  std::vector<std::string> argv = {INGERO_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  r.rc = run_command(argv, &r.out, &r.err);
  return r;
}

}  // namespace ingero::test
