// What the MCP tool families share: argument and schema helpers, trace access, and the text
// conventions (names print bare, anything else is quoted data). Internal to serve/mcp.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/chain.h"
#include "engine/trace_source.h"
#include "serve/mcp/tools.h"
#include "store/read_snapshot.h"
#include "store/sql_trace_source.h"

namespace ingero::serve::mcp {

using Json = nlohmann::json;
using engine::format_count;
using engine::format_duration;
using engine::format_wall;

// Names from backend tables and well-formed files print bare; anything else is quoted.
std::string ident(std::string_view s);
std::string dur(uint64_t ns);
std::string fmt(const char* f, double v);
std::string hex(uint64_t v);

// Schemas.
Json window_props();
// window_props() plus `extra`.
Json with_window(Json extra);
Json pid_prop();
Json limit_prop(int dflt, int max, const char* what);
Json object_schema(Json props, std::vector<std::string> required = {});
// Output schemas: the top level the SDKs validate structuredContent against.
Json out_schema(Json props, std::vector<std::string> required);
extern const Json kArr, kObj, kInt, kNum, kStr, kBool;
// Appended to every description that returns traced strings.
extern const std::string kDataNote;

int arg_int(const Json& a, const char* k, int dflt);
std::string arg_str(const Json& a, const char* k);

// Trace access.
// The source a tool reads: the trace file's (with its reader), or a fleet database's.
struct Opened {
  store::TraceReader* reader = nullptr;  // null over a fleet
  // A tool's reads of a file see one state of it (a trace being written commits meanwhile, and
  // its figures would not add up): ended after the source's reads (declared before it).
  std::unique_ptr<store::ReadSnapshot> snapshot;
  std::unique_ptr<store::SqlTraceSource> file;
  std::unique_ptr<FleetSource> fleet;
  engine::TraceSource* source = nullptr;
  // The first read error of either ("" when none).
  std::string error() const { return file ? file->error() : fleet ? fleet->error() : ""; }
};
ingero::Result<Opened> open_source(ToolContext& ctx);
// A pid or node (either may be absent) that the trace does not hold: the error naming those it
// does, as the CLI says it ("" where both are held).
std::string not_in_trace(engine::TraceSource& src, std::optional<uint32_t> pid,
                         const std::optional<std::string>& node);
ingero::Result<engine::Window> window_of(const Json& a, engine::TraceSource& src,
                                         bool with_pid = true);
Json window_json(const engine::Window& w, std::pair<int64_t, int64_t> span);
ToolOutput error_output(const std::string& msg);
std::string window_line(const engine::Window& w, std::pair<int64_t, int64_t> span, uint64_t events);

// The tool families: each adds its tools (name, schemas, handler) to `t`.
void add_overview_tools(std::vector<Tool>& t);  // get_check, get_trace_stats, processes
void add_chain_tools(std::vector<Tool>& t, const ToolHost& host);  // chains, run_demo
void add_stack_tools(std::vector<Tool>& t);                        // get_stacks
void add_collective_tools(std::vector<Tool>& t);                   // collectives, RDMA counters
void add_graph_tools(std::vector<Tool>& t);                        // graph lifecycle and frequency
void add_step_tools(std::vector<Tool>& t);                         // get_step_breakdown
void add_kernel_tools(std::vector<Tool>& t);                       // get_kernels
void add_inflight_tools(std::vector<Tool>& t);                     // get_inflight
void add_sql_tools(std::vector<Tool>& t);                          // run_sql
void add_tenant_tools(std::vector<Tool>& t);                       // get_tenants

}  // namespace ingero::serve::mcp
