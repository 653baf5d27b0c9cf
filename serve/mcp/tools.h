// The MCP tools: read-only views of one trace file for an AI agent. Each tool has a JSON
// Schema for its arguments and for its structured result, returns compact text for the model
// and the same data as structuredContent. Strings that come from the traced system (process
// names, paths, SQL values) are quoted and escaped in text and never appear unquoted, so a
// hostile process name cannot pose as an instruction (docs/mcp.md).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/trace_source.h"
#include "hal/result.h"
#include "hal/side_channel.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"

namespace ingero::serve::mcp {

// A fleet database the tools read instead of a trace file (`ingero mcp --source
// clickhouse://...`): every node's rows, behind the engine's source. The host opens it (app/
// knows ClickHouse; serve/ does not), one per tool call.
class FleetSource {
 public:
  virtual ~FleetSource() = default;
  virtual engine::TraceSource& source() = 0;
  // Nodes that shipped events, sorted.
  virtual std::vector<std::string> nodes() = 0;
  // Limits every read to one node (nullopt: all).
  virtual void set_scope(const std::optional<std::string>& node) = 0;
  // Subtracts each node's clock offset from its times (engine::estimate_clock_offsets).
  virtual void set_clock_offsets(const std::map<std::string, int64_t>& offsets) = 0;
  // The first read error ("" when none): an answer computed after one is incomplete.
  virtual std::string error() const = 0;
  virtual std::string title() const = 0;  // the database, as people name it
  // One read-only statement run by the database itself (its own SQL dialect and tables),
  // within `limits` (rows, the result's size as JSON, time).
  virtual ingero::Result<store::QueryResult> query(const std::string& sql,
                                                   const store::QueryLimits& limits) = 0;
};

// What the server needs from the program hosting it: the tools that audit the host or build a
// synthetic trace run code that lives with the commands owning it (app/), handed in here.
struct ToolHost {
  // The host capability audit, as `ingero check --json` prints it; null: get_check reports
  // the trace only.
  std::function<nlohmann::json()> audit;
  struct Demo {
    std::string name, description;
  };
  std::vector<Demo> demos;  // run_demo's scenarios
  // Writes a synthetic trace of one scenario (run_demo); null: no run_demo tool.
  std::function<ingero::Status(const std::string& scenario, store::TraceWriter& out)> write_demo;
  // The backends' views (hal::BackendRegistry::views()): every trace file the tools open or
  // write gets them. Empty: only the views a file holds itself.
  std::vector<hal::SqlView> views;
  // The backends' names of return codes (hal::BackendRegistry::error_code) for the readers the
  // tools analyse; empty: codes are numbers.
  hal::ErrorCodeFn error_codes;
  // The name of a device asynchronous event (hal::BackendRegistry::device_event_name); null
  // or "": get_rdma_counters names it by number.
  std::function<std::string_view(std::string_view api, uint64_t type)> device_event_name;
  // Set: the tools answer over this fleet database, not the trace file (ToolContext's path is
  // then only a name). An Error when it cannot be reached.
  std::function<ingero::Result<std::unique_ptr<FleetSource>>()> fleet;
  // run_sql's time limit (mcp.md: 5 s). Tests that hold a worker with an endless query raise it,
  // so that nothing they wait for ends by its limit on a slow machine.
  int sql_timeout_ms = 5000;
};

struct ToolOutput {
  std::string text;
  nlohmann::json structured = nlohmann::json::object();
  bool is_error = false;
};

// The trace file the server answers about, and what its tools share. Readers are opened per
// thread (SQLite connections are not shared across threads): one for the engine, one
// confined connection for run_sql.
class ToolContext {
 public:
  ToolContext(std::string db_path, ToolHost host);
  // Opens the file once to report a clear error at start (missing, foreign, corrupt, newer).
  ingero::Status validate();
  const std::string& db_path() const { return db_path_; }
  // The tools read a fleet database (ToolHost::fleet), not a trace file.
  bool over_fleet() const { return bool(host_.fleet); }
  ingero::Result<std::unique_ptr<FleetSource>> open_fleet() const { return host_.fleet(); }
  ingero::Result<store::TraceReader*> engine_reader();
  ingero::Result<store::TraceReader*> sql_reader();
  // The host capability audit, cached for 10 s (it loads BPF and places a uprobe); null when
  // the host supplied none.
  nlohmann::json host_check();
  const ToolHost& host() const { return host_; }

  // The output of a cacheable tool call, by `key` (tool name and arguments): computed by
  // `run` once per change of the trace file (store::TraceCache: size and mtime of the file and
  // its -wal), shared by concurrent identical calls, which wait for the one computation. At
  // most kMaxCachedCalls keys are kept, the least recently used dropped. Thread-safe.
  ToolOutput cached(const std::string& key, std::function<ToolOutput()> run);
  uint64_t cache_computations() const;      // tool runs made by cached(), for tests
  double last_computation_seconds() const;  // how long the last of them took
  static constexpr size_t kMaxCachedCalls = 64;

 private:
  ingero::Result<store::TraceReader*> reader(int which);
  std::string db_path_;
  ToolHost host_;
  uint64_t generation_;
  std::mutex check_mu_;
  nlohmann::json check_;
  std::chrono::steady_clock::time_point check_at_{};
  struct CacheSlot;
  mutable std::mutex cache_mu_;
  std::list<std::shared_ptr<CacheSlot>> cache_lru_;  // most recently used first
  std::atomic<uint64_t> cache_computations_{0};
  std::atomic<double> last_computation_s_{0};
};

struct ToolCall {
  const nlohmann::json& args;
  const std::atomic<bool>* cancel = nullptr;               // notifications/cancelled
  std::function<void(int level, const std::string&)> log;  // notifications/message
};

struct Tool {
  std::string name, title, description;
  nlohmann::json input_schema, output_schema;
  std::function<ToolOutput(ToolContext&, const ToolCall&)> run;
  // The answer depends on the trace file and the arguments only (not on the host, the time
  // or cancellation): served from ToolContext::cached.
  bool cacheable = false;
};

std::vector<Tool> make_tools(const ToolHost& host);

// Validates `value` against the subset of JSON Schema our input schemas use (type, properties,
// required, additionalProperties, enum, minimum/maximum, minLength/maxLength, pattern). Returns
// "" when valid, else what is wrong, naming the argument.
std::string validate_arguments(const nlohmann::json& schema, const nlohmann::json& value);
// An argument the schema types "integer" given as a number with no fraction (1.0: JSON Schema
// counts it an integer, and a JavaScript client may send one) becomes that integer.
void integral_numbers_as_integers(const nlohmann::json& schema, nlohmann::json& value);

// A traced string as it may appear in text for the model: JSON-quoted, control characters
// escaped, cut at `max` bytes.
std::string as_data(std::string_view s, size_t max = 64);

// The trace's sessions (host, kernel, start/stop, drops, lost calls), for get_check and the
// summary resource; an Error when the file cannot be read.
ingero::Result<nlohmann::json> sessions_json(store::TraceReader& reader);

// Resources: the schema documentation and the trace's session summary.
struct Resource {
  std::string uri, name, title, description, mime;
};
const std::vector<Resource>& resources();
ingero::Result<std::string> read_resource(ToolContext& ctx, const std::string& uri);

// The investigate prompt.
std::string investigate_prompt(const std::string& question, const std::string& since);

}  // namespace ingero::serve::mcp
