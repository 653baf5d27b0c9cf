// The MCP tools: read-only views of one trace file for an AI agent. Each tool has a JSON
// Schema for its arguments and for its structured result, returns compact text for the model
// and the same data as structuredContent. Strings that come from the traced system (process
// names, paths, SQL values) are quoted and escaped in text and never appear unquoted, so a
// hostile process name cannot pose as an instruction (docs/mcp.md).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hal/result.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"

namespace ingero::serve::mcp {

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
  ingero::Result<store::TraceReader*> engine_reader();
  ingero::Result<store::TraceReader*> sql_reader();
  // The host capability audit, cached for 10 s (it loads BPF and places a uprobe); null when
  // the host supplied none.
  nlohmann::json host_check();
  const ToolHost& host() const { return host_; }

 private:
  ingero::Result<store::TraceReader*> reader(int which);
  std::string db_path_;
  ToolHost host_;
  uint64_t generation_;
  std::mutex check_mu_;
  nlohmann::json check_;
  std::chrono::steady_clock::time_point check_at_{};
};

struct ToolCall {
  const nlohmann::json& args;
  const std::atomic<bool>* cancel = nullptr;               // notifications/cancelled
  std::function<void(int level, const std::string&)> log;  // notifications/message
};

struct ToolOutput {
  std::string text;
  nlohmann::json structured = nlohmann::json::object();
  bool is_error = false;
};

struct Tool {
  std::string name, title, description;
  nlohmann::json input_schema, output_schema;
  std::function<ToolOutput(ToolContext&, const ToolCall&)> run;
};

std::vector<Tool> make_tools(const ToolHost& host);

// Validates `value` against the subset of JSON Schema our input schemas use (type, properties,
// required, additionalProperties, enum, minimum/maximum, minLength/maxLength, pattern). Returns
// "" when valid, else what is wrong, naming the argument.
std::string validate_arguments(const nlohmann::json& schema, const nlohmann::json& value);

// A traced string as it may appear in text for the model: JSON-quoted, control characters
// escaped, cut at `max` bytes.
std::string as_data(std::string_view s, size_t max = 64);

// The trace's sessions (host, kernel, start/stop, drops, lost calls), for get_check and the
// summary resource.
nlohmann::json sessions_json(store::TraceReader& reader);

// Resources: the schema documentation and the trace's session summary.
struct Resource {
  std::string uri, name, title, description, mime;
};
const std::vector<Resource>& resources();
ingero::Result<std::string> read_resource(ToolContext& ctx, const std::string& uri);

// The investigate prompt.
std::string investigate_prompt(const std::string& question, const std::string& since);

}  // namespace ingero::serve::mcp
