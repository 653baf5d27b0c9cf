// The sinks the tracer wired, as one: every event, process and stack goes to each of them in
// order. A sink's error is counted and reported once per distinct message; it never keeps the
// event from the other sinks.
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

  Status on_event(const hal::Event& ev) override;
  Status on_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                    int64_t seen_at_ns) override;
  Status on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) override;
  Status on_inflight(const hal::InflightReport& report) override;
  Status on_kernel_name(const hal::KernelName& name) override;
  Status commit() override;

  // Called once per distinct error message.
  std::function<void(const std::string& message)> on_error;
  uint64_t errors() const { return errors_; }  // failed sink calls
  const std::string& last_error() const { return last_error_; }

 private:
  Status report(const Status& st);
  std::vector<hal::EventSink*> sinks_;
  uint64_t errors_ = 0;
  std::string last_error_;
};

}  // namespace ingero::capture
