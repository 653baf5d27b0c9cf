#include "capture/sink_set.h"

namespace ingero::capture {

Status SinkSet::failed(Status st) {
  ++errors_;
  if (st.error().message != last_error_ && on_error) on_error(st.error().message);
  last_error_ = st.error().message;
  return st;
}

template <class Call>
Status SinkSet::each(const Call& call) {
  // Every event passes here once per sink: a success is neither copied nor handed on.
  Status out;
  for (hal::EventSink* s : sinks_)
    if (Status st = call(*s); !st) [[unlikely]]
      out = failed(std::move(st));
  return out;
}

Status SinkSet::on_event(const hal::Event& ev) {
  return each([&](hal::EventSink& s) { return s.on_event(ev); });
}

Status SinkSet::on_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                           int64_t seen_at_ns) {
  return each([&](hal::EventSink& s) { return s.on_process(pid, name, cmdline, seen_at_ns); });
}

Status SinkSet::on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) {
  return each([&](hal::EventSink& s) { return s.on_stack(stack_id, frames); });
}

Status SinkSet::on_inflight(const hal::InflightReport& r) {
  return each([&](hal::EventSink& s) { return s.on_inflight(r); });
}

Status SinkSet::on_kernel_name(const hal::KernelName& name) {
  return each([&](hal::EventSink& s) { return s.on_kernel_name(name); });
}

Status SinkSet::commit() {
  return each([](hal::EventSink& s) { return s.commit(); });
}

Status SinkSet::on_snapshot(const hal::HostSnapshot& snap) {
  return each([&](hal::EventSink& s) { return s.on_snapshot(snap); });
}

Status SinkSet::on_process_stats(int64_t ts_ns, int64_t dur_ns,
                                 const std::vector<hal::ProcessStats>& deltas) {
  return each([&](hal::EventSink& s) { return s.on_process_stats(ts_ns, dur_ns, deltas); });
}

Status SinkSet::on_device_counters(int64_t ts_ns, std::string_view backend,
                                   const std::vector<hal::DevicePortSample>& ports) {
  return each([&](hal::EventSink& s) { return s.on_device_counters(ts_ns, backend, ports); });
}

Status SinkSet::on_device_samples(const std::vector<hal::DeviceSample>& samples) {
  return each([&](hal::EventSink& s) { return s.on_device_samples(samples); });
}

Status SinkSet::on_device_events(const std::vector<hal::DeviceEvent>& events) {
  return each([&](hal::EventSink& s) { return s.on_device_events(events); });
}

Status SinkSet::on_session_counters(const hal::SessionCounters& lost,
                                    const hal::KernelNaming* naming) {
  return each([&](hal::EventSink& s) { return s.on_session_counters(lost, naming); });
}

Status SinkSet::on_agent_stats(const hal::AgentStats& stats) {
  return each([&](hal::EventSink& s) { return s.on_agent_stats(stats); });
}

Status SinkSet::on_tick(int64_t mono_ns) {
  return each([&](hal::EventSink& s) { return s.on_tick(mono_ns); });
}

Status SinkSet::on_chains(const std::vector<engine::Chain>& chains, int64_t now_ns) {
  return each([&](hal::EventSink& s) { return s.on_chains(chains, now_ns); });
}

Status SinkSet::on_steps(const std::vector<hal::StepSample>& steps) {
  return each([&](hal::EventSink& s) { return s.on_steps(steps); });
}

}  // namespace ingero::capture
