// An engine::TraceSource that passes every read on to another, for tests that change one
// read: call_runs is not passed on, so runs come call by call (TraceSource's default).
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::test {

class ForwardingSource : public engine::TraceSource {
 public:
  explicit ForwardingSource(engine::TraceSource& s) : s_(s) {}
  void calls(const engine::Window& w, const engine::EventFn& fn) override { s_.calls(w, fn); }
  void host_events(const engine::Window& w, const engine::EventFn& fn) override {
    s_.host_events(w, fn);
  }
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override {
    return s_.snapshots(w);
  }
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override {
    return s_.process_activity(w);
  }
  std::map<uint32_t, engine::ProcessInfo> processes() override { return s_.processes(); }
  std::vector<std::string> nodes() override { return s_.nodes(); }
  std::pair<int64_t, int64_t> time_span() override { return s_.time_span(); }
  uint64_t event_count(const engine::Window& w) override { return s_.event_count(w); }
  std::optional<std::vector<engine::CallSketch>> folded_call_sketches(
      const engine::Window& w) override {
    return s_.folded_call_sketches(w);
  }
  bool has_stacks() override { return s_.has_stacks(); }
  std::vector<engine::StackFrameInfo> stack(uint64_t id) override { return s_.stack(id); }
  bool has_cpu_samples() override { return s_.has_cpu_samples(); }
  void cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) override {
    s_.cpu_samples(w, fn);
  }
  std::optional<engine::TraceLosses> losses() override { return s_.losses(); }
  std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret) override {
    return s_.error_code(api, ret);
  }

 protected:
  engine::TraceSource& inner() { return s_; }

 private:
  engine::TraceSource& s_;
};

}  // namespace ingero::test
