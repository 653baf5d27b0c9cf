// A trace file of one thread's launches as `ingero trace` writes them (blocks folded as they
// close), for the shipper's and the fleet's tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "hal/event.h"

namespace ingero::test {

// `n` launches of pid 4001 on node `node` (its host too), 10 us apart, 1-2 us long: most of
// them go into runs once their blocks are folded for good (under 0.99 x the op's p95). The
// session starts at `start_ns` (Unix ns) and stops 2 s later. `shape`, where given, changes
// launch i before it is written.
void write_launch_trace(const std::string& path, int n, const std::string& node, int64_t start_ns,
                        const std::function<void(hal::Event&, int)>& shape = {});

}  // namespace ingero::test
