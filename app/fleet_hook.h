// `ingero trace --clickhouse URL`: the tracer's few calls into the fleet shipper
// (fleet/shipper.h), kept here so app/tracer.cc only starts, stops and flushes it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "fleet/shipper.h"

namespace ingero::app {

// At exit, shipping (the background pass in flight, then a last one) ends by one deadline,
// --clickhouse-exit-timeout after the tracer starts to stop it; what is left waits in the
// file for the next start or `ingero ship`.
inline constexpr double kDefaultShipExitSeconds = 10;

// Creates the shipper for `db` (the file must exist); on failure prints why and returns null.
std::unique_ptr<fleet::Shipper> make_shipper(const std::string& db, const std::string& url,
                                             bool quiet);
// After the trace file is final: a last attempt until `deadline`, then one line saying what
// is left.
void finish_shipping(fleet::Shipper& shipper, const std::string& db, bool quiet,
                     std::chrono::steady_clock::time_point deadline);

}  // namespace ingero::app
