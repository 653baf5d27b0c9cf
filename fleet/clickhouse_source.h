// engine::TraceSource over a ClickHouse database that agents ship to (ch_schema.h): local
// tables on one server, or Distributed tables spanning the shards. Every read is one SELECT
// whose TabSeparated answer is parsed as it streams in (memory stays bounded by one row);
// filters, ordering and aggregations run in ClickHouse. All reads use readonly=1.
//
// Fleet specifics:
//  - set_scope(node): every read is limited to that node (a fleet's pids collide across
//    nodes; the engine analyses one node at a time, and the fleet rules read node by node).
//  - set_clock_offsets(): each node's clock offset (engine/fleet.h estimates them) is
//    subtracted from its timestamps in the SELECT, so windows, ordering and every time the
//    engine sees are on the reference clock. Nodes without an offset are read as stored.
//
// Adding an aggregate pushed down to ClickHouse (per-op quantiles, counts per step) is one
// method: build the SQL with where() and ts(), run it with rows(), convert the fields.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "fleet/clickhouse_client.h"
#include "fleet/tsv.h"
#include "fleet/untimed_means.h"
#include "store/event_columns.h"

namespace ingero::fleet {

class ClickHouseTraceSource final : public engine::TraceSource {
 public:
  // How long nodes() waits for the server's first answer (ClickHouseClient::ping).
  static constexpr int kPingMs = 10'000;
  // timeout_ms bounds each SELECT (0 = none).
  explicit ClickHouseTraceSource(std::unique_ptr<ClickHouseClient> client, int timeout_ms = 600000);

  // Names the calls' return codes (hal::BackendRegistry::error_code); without it they are
  // numbers.
  void name_errors_with(hal::ErrorCodeFn fn) { error_codes_ = std::move(fn); }
  std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret) override {
    return error_codes_ ? error_codes_(api, ret) : std::nullopt;
  }

  void calls(const engine::Window& w, const engine::EventFn& fn) override;
  void host_events(const engine::Window& w, const engine::EventFn& fn) override;
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessInfo> processes() override;
  std::pair<int64_t, int64_t> time_span() override;
  std::pair<int64_t, int64_t> node_span(const std::string& node) override;
  uint64_t event_count(const engine::Window& w) override;
  std::vector<engine::DeviceCounterSample> device_error_samples(const engine::Window& w) override;
  std::map<uint64_t, engine::CgroupInfo> cgroups() override;
  void device_samples(const engine::Window& w,
                      const std::function<void(const hal::DeviceSample&)>& fn) override;
  std::vector<hal::DeviceEvent> device_events(const engine::Window& w) override;
  std::optional<engine::TraceLosses> losses() override;
  bool has_stacks() override;
  std::vector<engine::StackFrameInfo> stack(uint64_t stack_id) override;
  // The `cpu_sample` host events and their stacks, as the file's reader gives them: the step
  // model places a host gap by them (without, explain over a fleet said "before main" where
  // the file said "in clock_gettime", and gave no stack).
  bool has_cpu_samples() override;
  void cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) override;
  // The stuck threads the agents recorded (their `inflight` rows, latest version of each);
  // none from a database set up before the table.
  std::vector<engine::InflightRow> inflight(const engine::Window& w) override;

  // Nodes that shipped events, sorted.
  std::vector<std::string> nodes() override;
  // Nodes whose sessions came from more than one host (two hosts traced under one --node),
  // with those hosts, sorted: the fleet reads each as one machine. Empty on a failed read
  // (recorded).
  std::map<std::string, std::vector<std::string>> shared_nodes();
  void set_scope(std::optional<std::string> node) { scope_ = std::move(node); }
  void set_clock_offsets(std::map<std::string, int64_t> offsets_ns);
  // The first error met (reads go on with what they have, as over SQLite); "" when none.
  const std::string& error() const { return error_; }
  const Endpoint& endpoint() const { return client_->endpoint(); }

 private:
  hal::ErrorCodeFn error_codes_;
  using RowFn = std::function<bool(const std::vector<TsvField>&)>;
  // Runs `sql` (without FORMAT) and calls fn per row; false on error (recorded).
  bool rows(const std::string& sql, size_t columns, const RowFn& fn);
  // The corrected time of `column` as Int64 SQL.
  std::string ts(const std::string& column) const;
  // " WHERE ..." for a window over `ts_column`: time (corrected, plus a raw pre-filter on the
  // stored column so ClickHouse prunes partitions), node (window or scope), pid if asked.
  std::string where(const engine::Window& w, const std::string& ts_column, bool with_pid) const;
  // First and last event (its end) of the window's events, widened to the stuck threads'
  // rows (their entry, their last observation).
  std::pair<int64_t, int64_t> span_of(const engine::Window& w);
  std::string table(const char* name) const { return client_->endpoint().database + "." + name; }
  // Whether the database has the table (tables added after a fleet was set up: the device
  // side channel's), asked once; a server that cannot say is taken not to.
  bool has_table(const char* name);
  std::map<std::string, bool> tables_;
  void events(const engine::Window& w, bool host, const engine::EventFn& fn);
  // The timed calls' means of the window's rows, read once per window; null when the read
  // failed (recorded).
  const UntimedMeans* untimed_means(const engine::Window& w);
  std::map<std::string, UntimedMeans> untimed_;  // by the window's filter

  std::unique_ptr<ClickHouseClient> client_;
  int timeout_ms_;
  std::optional<std::string> scope_;
  std::map<std::string, int64_t> offsets_;
  int64_t max_offset_ = 0;
  store::StringPool strings_;
  std::map<uint64_t, std::vector<engine::StackFrameInfo>> stack_cache_;
  std::optional<bool> has_stacks_;
  std::map<std::optional<std::string>, bool> has_cpu_samples_;  // by scope
  std::string error_;
};

}  // namespace ingero::fleet
