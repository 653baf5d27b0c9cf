// engine::TraceSource over a trace file: ours or the original implementation's, through the
// contract views the reader installs. Events come through store::EventCursor.
//
// A read that fails part-way (a damaged file) stops that read and is kept in error(): the
// answer computed from it is incomplete, so callers must check error() before reporting it.
#pragma once

#include <string>

#include "engine/trace_source.h"
#include "store/event_rows.h"
#include "store/trace_reader.h"

namespace ingero::store {

class SqlTraceSource final : public engine::TraceSource {
 public:
  explicit SqlTraceSource(TraceReader& reader) : reader_(reader) {}
  void calls(const engine::Window& w, const engine::EventFn& fn) override;
  void host_events(const engine::Window& w, const engine::EventFn& fn) override;
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessInfo> processes() override;
  std::pair<int64_t, int64_t> time_span() override;
  uint64_t event_count(const engine::Window& w) override;
  std::map<uint64_t, std::string> cgroup_paths() override;
  std::vector<engine::DeviceCounterSample> device_error_samples(const engine::Window& w) override;
  bool has_stacks() override;
  std::vector<engine::StackFrameInfo> stack(uint64_t stack_id) override;
  bool has_cpu_samples() override;
  void cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) override;
  std::optional<engine::TraceLosses> losses() override;
  // Distinct node names in the trace (merged files hold several).
  std::vector<std::string> nodes();
  // The first error met while reading ("" when none): any answer computed after it is
  // incomplete.
  const std::string& error() const { return error_; }

 private:
  // Prepares `sql`; records the error and returns nullopt on failure.
  std::optional<Stmt> prepare(const std::string& sql);
  // Steps `st` once: true on a row; false at the end or on an error (recorded).
  bool row(Stmt& st);
  void fail(const ingero::Error& e);
  EventFilter filter(const engine::Window& w, bool with_pid) const;
  TraceReader& reader_;
  StringPool strings_;
  std::string error_;
};

}  // namespace ingero::store
