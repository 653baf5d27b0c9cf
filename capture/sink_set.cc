#include "capture/sink_set.h"

namespace ingero::capture {

Status SinkSet::report(const Status& st) {
  if (st) return st;
  ++errors_;
  if (st.error().message != last_error_ && on_error) on_error(st.error().message);
  last_error_ = st.error().message;
  return st;
}

Status SinkSet::on_event(const hal::Event& ev) {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->on_event(ev)); !st) out = st;
  return out;
}

Status SinkSet::on_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                           int64_t seen_at_ns) {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->on_process(pid, name, cmdline, seen_at_ns)); !st) out = st;
  return out;
}

Status SinkSet::on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->on_stack(stack_id, frames)); !st) out = st;
  return out;
}

Status SinkSet::on_inflight(const hal::InflightReport& report_) {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->on_inflight(report_)); !st) out = st;
  return out;
}

Status SinkSet::on_kernel_name(const hal::KernelName& name) {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->on_kernel_name(name)); !st) out = st;
  return out;
}

Status SinkSet::commit() {
  Status out;
  for (hal::EventSink* s : sinks_)
    if (auto st = report(s->commit()); !st) out = st;
  return out;
}

}  // namespace ingero::capture
