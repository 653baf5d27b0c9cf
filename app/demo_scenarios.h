// `ingero demo`: synthetic traces of known incidents, written through the same TraceWriter
// and explained by the same engine as real traces. No root, no device. The data is synthetic
// and every report says so.
#pragma once

#include <string>
#include <vector>

#include "hal/result.h"
#include "store/trace_writer.h"

namespace ingero::app {

struct DemoScenario {
  std::string name;
  std::string description;
};

const std::vector<DemoScenario>& demo_scenarios();

// Writes the scenario into `writer` (a fresh file). Deterministic: same seed, same trace.
ingero::Status write_demo(const std::string& scenario, store::TraceWriter& writer);

}  // namespace ingero::app
