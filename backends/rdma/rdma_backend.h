// RDMA: libibverbs asynchronous events (opt-in) and the InfiniBand/RoCE port counters in sysfs.
//
// The verbs data path (ibv_post_send, ibv_poll_cq, ...) is static inline in <infiniband/verbs.h>
// and dispatches through the provider's function table: there is no exported symbol to
// uprobe on a stock distribution. What is traceable is the control path; we trace
// ibv_get_async_event, where port errors, QP/CQ/device fatal errors, port state and GID
// changes surface.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "hal/backend.h"

namespace ingero::backends {

// verbs: whether to attach to libibverbs (ingero trace --rdma-verbs).
std::unique_ptr<hal::VendorBackend> make_rdma_backend(bool verbs);

// ibv_event_type -> name ("IBV_EVENT_PORT_ERR"), and whether it is a fabric error.
std::string_view rdma_event_name(uint64_t type);
bool rdma_event_is_fabric_error(uint64_t type);
// Whether the event's element is a port number (PORT_ACTIVE, PORT_ERR, LID_CHANGE,
// PKEY_CHANGE, SM_CHANGE, CLIENT_REREGISTER, GID_CHANGE), not an object's address.
bool rdma_event_is_port_event(uint64_t type);

// One port's counters at one instant.
struct RdmaPortSample {
  std::string device;  // "mlx5_0"
  uint32_t port = 0;
  std::string transport;  // "InfiniBand" or "Ethernet" (RoCE), from link_layer
  std::string state;      // "4: ACTIVE"
  std::string rate;       // "200 Gb/sec (4X HDR)"
  // counter name -> value, in the counter's own unit as read; see rdma_counter_unit().
  std::map<std::string, uint64_t> counters;
  std::map<std::string, uint64_t> hw_counters;
  std::vector<std::string> unreadable;  // counters that exist but could not be read
};

// Reads every port of every device under ROOT/class/infiniband (ROOT defaults to /sys).
// A host without an HCA returns an empty list, not an error.
std::vector<RdmaPortSample> read_rdma_counters(const std::string& sysfs_root);

// port_rcv_data and port_xmit_data count 4-byte words; everything else counts events or
// packets. Returns the factor that converts the raw value to the counter's base unit
// (bytes for the data counters) and that unit.
std::pair<uint64_t, std::string_view> rdma_counter_unit(std::string_view counter);
// Error counters: an increase means something went wrong on the fabric.
bool rdma_counter_is_error(std::string_view counter);

// A port as the backend's poll_counters() returns it: every counter with its unit, error flag
// and Prometheus name (hw_counters/X -> "hw_X"); transport (a metric label), state and rate as
// attributes.
hal::DevicePortSample to_device_sample(const RdmaPortSample& port);

}  // namespace ingero::backends
