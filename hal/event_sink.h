// Where decoded events go: the seam between capture and everything that keeps or exports
// them (the SQLite store, the Prometheus registry, the ClickHouse shipper).
//
// capture/ hands every record it decodes to the sinks the tracer wired, in ring-buffer order,
// on one thread. A sink never sees the BPF records, and capture never includes a sink: a new
// sink is one class here and one line in the tracer. The interface lives in hal/, beside the
// event model it carries, so sinks depend on the vocabulary and not on the capture code.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "hal/event.h"
#include "hal/inflight.h"
#include "hal/kernel_names.h"
#include "hal/result.h"
#include "hal/stack_frame.h"

namespace ingero::hal {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // One decoded call or host event. An error is counted and reported by capture (once per
  // distinct message); the next event is still offered.
  virtual Status on_event(const Event& ev) = 0;
  // A process seen for the first time: its name and command line ("" once it has exited).
  virtual Status on_process(uint32_t /*pid*/, std::string_view /*name*/,
                            std::string_view /*cmdline*/, int64_t /*seen_at_ns*/) {
    return {};
  }
  // A stack seen for the first time under this id (ids hash the resolved frames); the events
  // that name it follow.
  virtual Status on_stack(uint64_t /*stack_id*/, const std::vector<StackFrame>& /*frames*/) {
    return {};
  }
  // Once a second: the threads stuck now, and those that stopped being stuck
  // (hal/inflight.h).
  virtual Status on_inflight(const InflightReport& /*report*/) { return {}; }
  // A kernel's name for one process, once per (pid, func), before the first launch that needs it
  // is handed over (hal/kernel_names.h).
  virtual Status on_kernel_name(const KernelName& /*name*/) { return {}; }
  // Everything handed over so far is durable (the store commits its batch; others may flush).
  virtual Status commit() { return {}; }
};

}  // namespace ingero::hal
