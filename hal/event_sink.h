// Where everything the tracer observes goes: the seam between capture and everything that keeps
// or exports it (the SQLite store, the Prometheus registry, the OTLP exporter).
//
// capture/ hands every record it decodes to the sinks the tracer wired, in ring-buffer order,
// on one thread; the tracer's periodic work (app/trace_samplers.cc, app/trace_periodic.cc)
// hands over the sampled kinds the same way, once per kind, through the one capture::SinkSet.
// A sink never sees the BPF records, capture never includes a sink, and no sink includes
// another: what they share is named here and in hal/sink_records.h. A new sink is one class
// and one line in the tracer; a sink overrides the kinds it keeps, the others are no-ops.
//
// Every method is called on the tracer's event-loop thread. A returned error is counted and
// reported by the SinkSet (once per distinct message) and never keeps the kind from the other
// sinks.
//
// The live analysis's chains are the engine's (engine/chain.h); they are named here by
// declaration only, so hal links nothing of the engine: a sink that reads them includes it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "hal/device_sampler.h"
#include "hal/event.h"
#include "hal/inflight.h"
#include "hal/kernel_names.h"
#include "hal/result.h"
#include "hal/side_channel.h"
#include "hal/sink_records.h"
#include "hal/stack_frame.h"

namespace ingero::engine {
struct Chain;
}

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

  // The sampled kinds (app/trace_samplers.cc, app/device_poller.h).
  // Once a second: the host's CPU, memory and load.
  virtual Status on_snapshot(const HostSnapshot& /*s*/) { return {}; }
  // Every 5 s: each process's activity over [ts_ns, ts_ns + dur_ns) (wall clock); only the
  // processes with any.
  virtual Status on_process_stats(int64_t /*ts_ns*/, int64_t /*dur_ns*/,
                                  const std::vector<ProcessStats>& /*deltas*/) {
    return {};
  }
  // Every 5 s: one backend's device-port counters (hal/side_channel.h), as cumulative totals
  // read at `ts_ns` (wall clock). A host without the devices hands over nothing.
  virtual Status on_device_counters(int64_t /*ts_ns*/, std::string_view /*backend*/,
                                    const std::vector<DevicePortSample>& /*ports*/) {
    return {};
  }
  // Every --flush-ms: the device side channel's samples and events since the last
  // (hal/device_sampler.h); the vectors may be empty.
  virtual Status on_device_samples(const std::vector<DeviceSample>& /*samples*/) { return {}; }
  virtual Status on_device_events(const std::vector<DeviceEvent>& /*events*/) { return {}; }

  // The session's own counters.
  // Every 5 s: what the session lost so far, and (null when kernels are not named) what it
  // could not name.
  virtual Status on_session_counters(const SessionCounters& /*lost*/,
                                     const KernelNaming* /*naming*/) {
    return {};
  }
  // Once a second: the agent's totals (hal/sink_records.h).
  virtual Status on_agent_stats(const AgentStats& /*stats*/) { return {}; }
  // Once a second, after on_agent_stats: the monotonic clock of the events, for a sink that
  // ages what it keeps (series of exited processes).
  virtual Status on_tick(int64_t /*mono_ns*/) { return {}; }

  // The live analysis (every 30 s, of the last 5 minutes): the chains active now, at `now_ns`
  // (Unix ns), and the steady steps that ended since the last analysis.
  virtual Status on_chains(const std::vector<engine::Chain>& /*chains*/, int64_t /*now_ns*/) {
    return {};
  }
  virtual Status on_steps(const std::vector<StepSample>& /*steps*/) { return {}; }
};

}  // namespace ingero::hal
