// The sinks the tracer wired, as one: every kind of the seam (hal/event_sink.h) goes to each
// of them in the order they were added, once. A sink's error is counted and reported once per
// distinct message; it never keeps the kind from the other sinks. app/ calls the set once per
// kind and never a sink directly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hal/event_sink.h"

namespace ingero::capture {

class SinkSet final : public hal::EventSink {
 public:
  explicit SinkSet(std::vector<hal::EventSink*> sinks = {}) : sinks_(std::move(sinks)) {}
  void add(hal::EventSink* sink) { sinks_.push_back(sink); }
  size_t size() const { return sinks_.size(); }

  Status on_event(const hal::Event& ev) override;
  Status on_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                    int64_t seen_at_ns) override;
  Status on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) override;
  Status on_inflight(const hal::InflightReport& report) override;
  Status on_kernel_name(const hal::KernelName& name) override;
  Status commit() override;
  Status on_snapshot(const hal::HostSnapshot& s) override;
  Status on_process_stats(int64_t ts_ns, int64_t dur_ns,
                          const std::vector<hal::ProcessStats>& deltas) override;
  Status on_device_counters(int64_t ts_ns, std::string_view backend,
                            const std::vector<hal::DevicePortSample>& ports) override;
  Status on_device_samples(const std::vector<hal::DeviceSample>& samples) override;
  Status on_device_events(const std::vector<hal::DeviceEvent>& events) override;
  Status on_session_counters(const hal::SessionCounters& lost,
                             const hal::KernelNaming* naming) override;
  Status on_agent_stats(const hal::AgentStats& stats) override;
  Status on_tick(int64_t mono_ns) override;
  Status on_chains(const std::vector<engine::Chain>& chains, int64_t now_ns) override;
  Status on_steps(const std::vector<hal::StepSample>& steps) override;

  // Called once per distinct error message.
  std::function<void(const std::string& message)> on_error;
  uint64_t errors() const { return errors_; }  // failed sink calls
  const std::string& last_error() const { return last_error_; }

 private:
  // Hands one kind to every sink; the last error, if any.
  template <class Call>
  Status each(const Call& call);
  // Counts a sink's error and reports it once per distinct message; returns it.
  Status failed(Status st);
  std::vector<hal::EventSink*> sinks_;
  uint64_t errors_ = 0;
  std::string last_error_;
};

}  // namespace ingero::capture
