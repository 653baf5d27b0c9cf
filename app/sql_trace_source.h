// engine::TraceSource over a trace file: ours or the original implementation's, through the
// contract views the reader installs.
#pragma once

#include <deque>
#include <set>
#include <string>

#include "engine/trace_source.h"
#include "store/trace_reader.h"

namespace ingero::app {

class SqlTraceSource final : public engine::TraceSource {
 public:
  explicit SqlTraceSource(store::TraceReader& reader) : reader_(reader) {}
  void calls(const engine::Window& w, const engine::EventFn& fn) override;
  void host_events(const engine::Window& w, const engine::EventFn& fn) override;
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessInfo> processes() override;
  std::pair<int64_t, int64_t> time_span() override;
  uint64_t event_count(const engine::Window& w) override;
  std::map<uint64_t, std::string> cgroup_paths() override;
  std::vector<engine::RdmaSample> rdma_error_samples(const engine::Window& w) override;
  bool has_stacks() override;
  std::vector<engine::StackFrameInfo> stack(uint64_t stack_id) override;
  // Distinct node names in the trace (merged files hold several).
  std::vector<std::string> nodes();
  // The first error met while reading (queries keep going with what they have).
  const std::string& error() const { return error_; }

 private:
  std::string_view intern(std::string s);
  store::Stmt prepare(const std::string& sql);
  store::TraceReader& reader_;
  std::set<std::string, std::less<>> strings_;
  std::string error_;
};

// --since/--from/--to resolution against a trace: relative times count back from the
// trace's last event (a stored trace is read long after it was written).
struct WindowSpec {
  std::string since, from, to;
  std::optional<uint32_t> pid;
};
ingero::Result<engine::Window> resolve_window(engine::TraceSource& source, const WindowSpec& spec);

}  // namespace ingero::app
