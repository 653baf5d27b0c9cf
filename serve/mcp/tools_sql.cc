// The MCP run_sql tool: one confined read-only statement.

#include "serve/mcp/tool_support.h"
#include "store/query_json.h"
#include "store/temp_file_cap.h"
#include "store/trace_reader.h"

namespace ingero::serve::mcp {
namespace {

// docs/mcp.md promises at most 256 KiB per run_sql response, whatever the values' types:
// the rows are read under a budget for their JSON size (store::QueryLimits::max_bytes, every
// type counted), and the response (text for the model plus structuredContent, both carrying
// the rows) is measured once built and cut further if it still passes the limit.
constexpr size_t kMaxResponseBytes = 256u << 10;
constexpr size_t kEnvelopeBytes = 4u << 10;     // JSON-RPC envelope, columns, counts
constexpr size_t kRowBudgetBytes = 100u << 10;  // rows as JSON; the text repeats them

// A value of structuredContent's rows: an integer past 2^53 - 1 (a nanosecond timestamp, a
// stack hash) as its decimal string, which a JavaScript client's JSON.parse would round (the
// text and the structured rows disagreed, and a filter on the structured stack_hash found
// nothing); every other value as query --json gives it.
Json structured_cell(const store::Value& v) {
  constexpr int64_t kExact = (int64_t(1) << 53) - 1;
  if (const auto* i = std::get_if<int64_t>(&v); i && (*i > kExact || *i < -kExact))
    return std::to_string(*i);
  return store::to_json(v);
}

std::string cell_text(const store::Value& v) {
  if (std::holds_alternative<std::string>(v)) return as_data(std::get<std::string>(v), 200);
  return store::to_text(v);
}

// Builds the output from the first `n` rows; returns its size as sent (both renderings).
size_t render(const store::QueryResult& res, size_t n, bool truncated, const std::string& reason,
              ToolOutput& o) {
  Json rows = Json::array();
  std::string t;
  for (size_t i = 0; i < res.columns.size(); ++i) t += (i ? "\t" : "") + ident(res.columns[i]);
  t += "\n";
  for (size_t r = 0; r < n; ++r) {
    Json jr = Json::array();
    for (size_t i = 0; i < res.rows[r].size(); ++i) {
      jr.push_back(structured_cell(res.rows[r][i]));
      t += (i ? "\t" : "") + cell_text(res.rows[r][i]);
    }
    t += "\n";
    rows.push_back(std::move(jr));
  }
  t += "(" + std::to_string(n) + " row" + (n == 1 ? "" : "s");
  if (truncated) t += "; truncated: " + reason;
  t += ")\n";
  if (!res.note.empty()) t += "Note: " + res.note + "\n";
  o.structured = {{"columns", res.columns},
                  {"rows", std::move(rows)},
                  {"row_count", n},
                  {"truncated", truncated},
                  {"truncated_reason", reason}};
  if (!res.note.empty()) o.structured["note"] = res.note;
  o.text = std::move(t);
  auto size = [](const Json& j) {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace).size();
  };
  return size(o.structured) + size(Json(o.text));
}

// The statement over a fleet database (`ingero mcp --source`): ClickHouse runs it, read-only.
ingero::Result<store::QueryResult> fleet_query(ToolContext& ctx, const std::string& sql,
                                               const store::QueryLimits& lim) {
  auto f = ctx.open_fleet();
  if (!f) return f.error();
  return (*f)->query(sql, lim);
}

ToolOutput run_sql(ToolContext& ctx, const ToolCall& call) {
  store::TraceReader* reader = nullptr;
  if (!ctx.over_fleet()) {
    auto r = ctx.sql_reader();
    if (!r) return error_output(r.error().message);
    reader = *r;
  }
  store::QueryLimits lim;
  lim.max_rows = size_t(arg_int(call.args, "limit", 100));
  lim.max_bytes = kRowBudgetBytes;
  lim.timeout_ms = ctx.host().sql_timeout_ms;
  lim.max_value_bytes = 64 << 10;
  lim.cancel = call.cancel;
  std::string sql = arg_str(call.args, "sql");
  auto res = reader ? store::run_query(*reader, sql, lim) : fleet_query(ctx, sql, lim);
  if (!res && reader && store::temp_cap_hit() &&
      res.error().message.find("database or disk is full") != std::string::npos)
    res = ingero::make_error(
        "the statement needs more temporary files (its sorts, GROUP BY or DISTINCT over many "
        "rows) than the server lets every request hold at once (ingero mcp --max-temp): a "
        "WHERE or LIMIT narrows it");
  if (!res) {
    if (call.log) call.log(4, "run_sql refused: " + res.error().message);
    return error_output(res.error().message +
                        (reader ? ". Tables and views: read resource ingero://docs/schema"
                                : ". ClickHouse tables: calls, events, sessions, inflight, ... "
                                  "(docs/fleet.md)"));
  }
  ToolOutput o;
  size_t n = res->rows.size();
  const std::string cut = "response size limit of " + std::to_string(kMaxResponseBytes) + " bytes";
  size_t bytes = render(*res, n, res->truncated, res->truncated_reason, o);
  // Rows of many columns whose text needs escaping may still pass: halve until it fits.
  while (bytes + kEnvelopeBytes > kMaxResponseBytes && n > 0) {
    n /= 2;
    bytes = render(*res, n, true, cut, o);
  }
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
       "ingero://docs/schema. Limits: 5 s, the row limit (default 100, max 1000), 100 KiB of "
       "rows as JSON (the response carries them twice, as text and as structuredContent: 256 "
       "KiB at most), 64 KiB a value. In structuredContent an integer past 2^53 (ns "
       "timestamps, hashes) is its decimal string, exact. "
       "Writes, ATTACH, state-changing pragmas and extensions are refused by SQLite." +
           kDataNote,
       object_schema({{"sql", {{"type", "string"}, {"minLength", 1}, {"maxLength", 20000}}},
                      {"limit", limit_prop(100, 1000, "rows")}},
                     {"sql"}),
       out_schema({{"columns", kArr},
                   {"rows", kArr},
                   {"row_count", kInt},
                   {"truncated", kBool},
                   {"note", kStr}},
                  {"columns", "rows", "row_count", "truncated"}),
       run_sql});
}

}  // namespace ingero::serve::mcp
