// `ingero trace --clickhouse URL`: the tracer's few calls into the fleet shipper
// (fleet/shipper.h), kept here so app/tracer.cc only starts, stops and flushes it.
#pragma once

#include <memory>
#include <string>

#include "fleet/shipper.h"

namespace ingero::app {

// How long the agent keeps trying at exit before it leaves the rest to the next start.
inline constexpr int kFinalShipSeconds = 15;

// Creates the shipper for `db` (the file must exist); on failure prints why and returns null.
std::unique_ptr<fleet::Shipper> make_shipper(const std::string& db, const std::string& url,
                                             bool quiet);
// After the trace file is final: a bounded last attempt, then one line saying what is left.
void finish_shipping(fleet::Shipper& shipper, const std::string& db, bool quiet);

}  // namespace ingero::app
