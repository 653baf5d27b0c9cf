// What a backend may offer besides its probes: a device side channel (counters polled from
// sysfs, names of device asynchronous events), its lines in `ingero check`, and the SQL views
// it adds to every trace file. All optional: VendorBackend's defaults offer none of them.
//
// Everything here is plain data. The callers (the tracer's samplers, the Prometheus sink, the
// store, `check`, MCP) stay generic: a backend's data reaches the trace file, the metrics
// endpoint and the audit without any of them naming the backend.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ingero::hal {

// One counter of one device port at one instant.
struct CounterSample {
  std::string counter;  // as stored: "port_rcv_errors", "hw_counters/out_of_buffer"
  // The Prometheus family is "ingero_<backend>_<metric>" + "_bytes" when unit is bytes +
  // "_total", lower-cased with anything not alphanumeric turned into '_'.
  std::string metric;     // "port_rcv_errors", "hw_out_of_buffer"
  std::string help;       // the family's HELP text
  uint64_t value = 0;     // as read
  uint64_t factor = 1;    // value * factor is the value in `unit` (4-byte words -> bytes)
  std::string unit;       // "bytes", "packets", "events"
  bool is_error = false;  // an increase means something went wrong
};

// A property of a port ("transport" = "InfiniBand"). Stored with every counter row;
// metric_label ones also label its Prometheus series, as "<backend>_<key>".
struct DeviceAttribute {
  std::string key, value;
  bool metric_label = false;
};

// One port of one device, as a poll read it. Cumulative counters: consumers export increases.
struct DevicePortSample {
  std::string device;  // "mlx5_0"
  uint32_t port = 0;
  std::vector<DeviceAttribute> attributes;
  std::vector<CounterSample> counters;
  std::vector<std::string> unreadable;  // counters that exist but could not be read
  std::string_view attribute(std::string_view key) const {
    for (const auto& a : attributes)
      if (a.key == key) return a.value;
    return {};
  }
};

// One line of `ingero check`, as the backend judges its side channel.
struct CheckLine {
  enum class Status { kPass, kOptional, kFail };
  std::string name;  // "infiniband"
  Status status = Status::kPass;
  std::string value, detail, fix;
};

// A view the backend adds to trace files, over the contract views (calls, host_events) or the
// device_counters table, so it reads the same over every file this build opens. The store
// leaves it out of a file it cannot be read over (an old file without device_counters) and
// out of one that has a table of that name. Both strings point at static storage.
struct SqlView {
  std::string_view name;    // "cuda_events"
  std::string_view select;  // the body after "CREATE VIEW name AS"
};

}  // namespace ingero::hal
