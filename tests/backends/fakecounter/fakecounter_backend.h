// A test-only backend with no probes and a side channel: counters polled from a fake sysfs
// tree, its line in `ingero check`, and a view. It shows that a backend with a poller is one
// folder and one ingero_add_backend line (tests/CMakeLists.txt), and that its counters reach
// check, the trace file and Prometheus through hal::VendorBackend alone.
//
// The tree: SYSFS/class/fakecounter/DEVICE/ports/N/{link,state,counters/NAME}. rx_words counts
// 4-byte words (stored and exported in bytes); a name ending in _errors is an error counter.
#pragma once

#include <memory>

#include "hal/backend.h"

namespace ingero::test {

std::unique_ptr<hal::VendorBackend> make_fakecounter_backend();

}  // namespace ingero::test
