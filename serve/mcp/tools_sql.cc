// The MCP run_sql tool: one confined read-only statement.
#include <sstream>

#include "serve/mcp/tool_support.h"
#include "store/query_json.h"
#include "store/trace_reader.h"

namespace ingero::serve::mcp {
namespace {

ToolOutput run_sql(ToolContext& ctx, const ToolCall& call) {
  auto r = ctx.sql_reader();
  if (!r) return error_output(r.error().message);
  store::QueryLimits lim;
  lim.max_rows = size_t(arg_int(call.args, "limit", 100));
  lim.max_bytes = 256u << 10;
  lim.timeout_ms = 5000;
  lim.max_value_bytes = 64 << 10;
  lim.cancel = call.cancel;
  std::string sql = arg_str(call.args, "sql");
  auto res = store::run_query(**r, sql, lim);
  if (!res) {
    if (call.log) call.log(4, "run_sql refused: " + res.error().message);
    return error_output(res.error().message +
                        ". Tables and views: read resource ingero://docs/schema");
  }
  Json rows = Json::array();
  std::ostringstream t;
  for (size_t i = 0; i < res->columns.size(); ++i) t << (i ? "\t" : "") << ident(res->columns[i]);
  t << "\n";
  for (const auto& row : res->rows) {
    Json jr = Json::array();
    for (size_t i = 0; i < row.size(); ++i) {
      jr.push_back(store::to_json(row[i]));
      const auto& v = row[i];
      t << (i ? "\t" : "");
      if (std::holds_alternative<std::string>(v))
        t << as_data(std::get<std::string>(v), 200);
      else
        t << store::to_text(v);
    }
    t << "\n";
    rows.push_back(std::move(jr));
  }
  t << "(" << res->rows.size() << " row" << (res->rows.size() == 1 ? "" : "s");
  if (res->truncated) t << "; truncated: " << res->truncated_reason;
  t << ")\n";
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"columns", res->columns},
                  {"rows", rows},
                  {"row_count", res->rows.size()},
                  {"truncated", res->truncated},
                  {"truncated_reason", res->truncated_reason}};
  return o;
}

}  // namespace

void add_sql_tools(std::vector<Tool>& t) {
  t.push_back(
      {"run_sql", "Read-only SQL",
       "One read-only SQLite SELECT over the trace. Views: calls (every GPU API call), "
       "cuda_events, "
       "hip_events, nccl_events, host_events, tcp_events, process_names, sessions; schema in "
       "resource "
       "ingero://docs/schema. Limits: 5 s, the row limit (default 100, max 1000), 256 KiB of "
       "results. "
       "Writes, ATTACH, state-changing pragmas and extensions are refused by SQLite." +
           kDataNote,
       object_schema({{"sql", {{"type", "string"}, {"minLength", 1}, {"maxLength", 20000}}},
                      {"limit", limit_prop(100, 1000, "rows")}},
                     {"sql"}),
       out_schema({{"columns", kArr}, {"rows", kArr}, {"row_count", kInt}, {"truncated", kBool}},
                  {"columns", "rows", "row_count", "truncated"}),
       run_sql});
}

}  // namespace ingero::serve::mcp
