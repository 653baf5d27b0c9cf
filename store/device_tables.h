// The device side channel's tables: device_samples (utilisation, memory, clocks, power,
// temperature, throttling, ECC per device and per process) and device_events (Xid, ECC, a
// lost GPU). docs/schema.md describes their columns.
#pragma once

#include <string>

namespace ingero::store {

// CREATE TABLE IF NOT EXISTS for both, with their time indexes, from their description
// (store/table_defs.h). The writer runs it with each
// batch of device rows (store/trace_writer_device.cc): a file gains the tables with its first
// device sample, and a host without GPUs writes files without them (no version bump: readers
// look for the tables and find no device data where they are absent).
const std::string& device_tables_ddl();

}  // namespace ingero::store
