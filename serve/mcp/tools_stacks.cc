// The MCP get_stacks tool: the call stacks that led to one op.
#include <algorithm>
#include <map>
#include <sstream>

#include "hal/demangle.h"
#include "serve/mcp/tool_support.h"
#include "store/stacks.h"

namespace ingero::serve::mcp {
namespace {

std::string frame_text(const store::StackFrame& f) {
  if (f.python)
    return "[Python] " +
           as_data(f.file + ":" + std::to_string(f.line) + " in " + f.function + "()", 200);
  std::string s = as_data(f.function.empty() ? "??" : hal::demangle(f.function), 160);
  if (!f.file.empty()) s += " at " + as_data(f.file + ":" + std::to_string(f.line), 160);
  std::string mod =
      f.module.substr(f.module.rfind('/') == std::string::npos ? 0 : f.module.rfind('/') + 1);
  if (f.module_offset) {
    char b[32];
    std::snprintf(b, sizeof b, "+0x%llx", (unsigned long long)*f.module_offset);
    s += " in " + as_data(mod + b, 120);
  } else if (!mod.empty()) {
    s += " in " + as_data(mod, 120);
    if (f.function.empty() && !f.address.empty()) s += " @" + as_data(f.address, 40);
  }
  return s;
}

Json frame_json(const store::StackFrame& f) {
  Json x = {{"kind", f.python ? "python" : "native"},
            {"function", f.python ? f.function : hal::demangle(f.function)},
            {"file", f.file},
            {"line", f.line},
            {"module", f.module},
            {"address", f.address}};
  if (!f.python && x["function"] != f.function) x["symbol"] = f.function;
  if (f.module_offset) x["module_offset"] = *f.module_offset;
  return x;
}

// An op the trace does not name (a typo): the error naming those it does, as for an unknown pid
// or node ("" where it names it). It was answered "0 calls", isError false.
std::string unknown_op(store::Db& db, const std::string& opname) {
  if (!db.column_exists("ops", "name")) return "";
  // The original implementation's sources have no vendor: every op it names.
  auto known = db.prepare(
      db.column_exists("sources", "vendor") && db.column_exists("ops", "source_id")
          ? "SELECT DISTINCT o.name FROM ops o JOIN sources s ON s.id = o.source_id WHERE "
            "s.vendor <> 'host' ORDER BY o.name"
          : "SELECT DISTINCT name FROM ops ORDER BY name");
  if (!known) return known.error().message;
  std::vector<std::string> ops;
  while (true) {
    auto row = known->step();
    if (!row) return row.error().message;
    if (!*row) break;
    ops.push_back(known->text(0));
  }
  if (!ops.empty() && std::find(ops.begin(), ops.end(), opname) == ops.end()) {
    std::string names;
    for (size_t i = 0; i < ops.size() && i < 40; ++i) names += (i ? ", " : "") + ops[i];
    if (ops.size() > 40) names += ", ... (" + std::to_string(ops.size()) + " in all)";
    return "op '" + opname + "' is not an op of this trace; its ops: " + names;
  }
  return "";
}

// One stack of the answer (the statement's row): its JSON and its lines of text.
struct StackRow {
  Json json;
  std::string text;
};

// A row of get_stacks' statement: stack_hash, calls, total, max, pids, min pid, timed calls.
ingero::Result<StackRow> stack_row(store::Db& db, store::Stmt& st, int64_t with_stack,
                                   size_t max_frames, int rank) {
  int64_t hash = st.int64(0);
  uint64_t n = uint64_t(st.int64(1)), total = uint64_t(st.real(2) + 0.5),
           mx = uint64_t(st.int64(3)), timed = uint64_t(st.int64(6));
  auto frames = store::read_stack(db, hash);
  if (!frames) return frames.error();
  Json jf = Json::array();
  size_t omitted = 0;
  std::ostringstream ft;
  if (*frames) {
    for (const auto& f : **frames) {
      if (jf.size() >= max_frames) {
        ++omitted;
        continue;
      }
      jf.push_back(frame_json(f));
      ft << "    " << frame_text(f) << "\n";
    }
  }
  char hex[24];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
  StackRow out;
  out.json = {{"hash", hex},
              {"calls", n},
              {"share", with_stack ? double(n) / double(with_stack) : 0.0},
              {"total_ns", total},
              {"avg_ns", n ? total / n : 0},
              {"timed_calls", timed},
              {"max_ns", mx},
              {"pids", st.int64(4)},
              {"frames", jf},
              {"frames_omitted", omitted}};
  if (!*frames) out.json["error"] = "stack " + std::string(hex) + " is referenced but not stored";
  std::ostringstream t;
  t << "#" << rank << " " << format_count(n) << " calls ("
    << fmt("%.0f", with_stack ? 100.0 * double(n) / double(with_stack) : 0.0) << "%), avg "
    << dur(n ? total / n : 0)
    << (timed == n ? ""
        : timed    ? " (of its timed calls)"
                   : " (the op's)")
    << ", max " << dur(mx) << "\n"
    << ft.str();
  if (omitted) t << "    (" << omitted << " outer frames omitted)\n";
  out.text = t.str();
  return out;
}

ToolOutput get_stacks(ToolContext& ctx, const ToolCall& call) {
  auto r = ctx.engine_reader();
  if (!r) return error_output(r.error().message);
  auto& db = (*r)->db();
  std::string opname = arg_str(call.args, "op");
  ToolOutput o;
  if (!store::has_stacks(db)) {
    o.text =
        "no stacks captured: this trace was recorded without call stacks (record with `ingero "
        "trace --stack`)";
    o.structured = {
        {"op", opname}, {"captured", false}, {"stacks", Json::array()}, {"note", o.text}};
    return o;
  }
  if (std::string why = unknown_op(db, opname); !why.empty()) return error_output(why);
  store::SqlTraceSource src(**r);
  auto w = window_of(call.args, src);
  if (!w) return error_output(w.error().message);
  size_t limit = size_t(arg_int(call.args, "limit", 5));
  size_t max_frames = size_t(arg_int(call.args, "max_frames", 24));
  std::string order = arg_str(call.args, "order");
  std::string where = "op = ?1 AND ts_ns >= ?2 AND ts_ns <= ?3";
  if (w->pid) where += " AND pid = " + std::to_string(*w->pid);
  if (w->node) where += " AND node = ?4";
  auto bind = [&](store::Stmt& st) {
    st.bind(1, opname).bind(2, w->from_ns).bind(3, w->to_ns);
    if (w->node) st.bind(4, *w->node);
  };
  // Launches not timed (--launch-timing) have no duration: a stack's time is its timed calls'
  // mean for each of its calls (the op's mean where none of its calls was timed), as the engine
  // counts them. They were 0 ns: "avg 68ns" for launches whose timed ones took 2.2 us.
  auto totals = db.prepare(
      "SELECT count(*), sum(stack_hash IS NOT NULL AND stack_hash != 0), "
      "coalesce(total(dur_ns) / nullif(count(dur_ns), 0), 0) FROM calls WHERE " +
      where);
  if (!totals) return error_output(totals.error().message);
  bind(*totals);
  if (auto s = totals->step(); !s) return error_output(s.error().message);
  int64_t calls = totals->int64(0), with_stack = totals->int64(1);
  const double op_mean = totals->real(2);
  const std::string mean =
      "coalesce(total(dur_ns) / nullif(count(dur_ns), 0), " + fmt("%.3f", op_mean) + ")";
  auto st =
      db.prepare("SELECT stack_hash, count(*), " + mean + " * count(*), max(dur_ns), " +
                 "count(DISTINCT pid), min(pid), count(dur_ns) FROM calls WHERE " + where +
                 " AND stack_hash IS NOT NULL AND stack_hash != 0 GROUP BY stack_hash "
                 "ORDER BY " +
                 (order == "total_time" ? "3" : "2") + " DESC, 1 LIMIT " + std::to_string(limit));
  if (!st) return error_output(st.error().message);
  bind(*st);
  Json stacks = Json::array();
  std::ostringstream t;
  t << ident(opname) << ": " << format_count(uint64_t(calls)) << " calls, "
    << format_count(uint64_t(with_stack)) << " with a stack\n";
  int rank = 0;
  while (true) {
    auto row = st->step();
    if (!row) return error_output(row.error().message);
    if (!*row) break;
    auto one = stack_row(db, *st, with_stack, max_frames, ++rank);
    if (!one) return error_output(one.error().message);
    stacks.push_back(std::move(one->json));
    t << one->text;
  }
  if (stacks.empty()) t << "no stacks for this op in the window\n";
  o.text = t.str();
  o.structured = {{"op", opname},
                  {"captured", true},
                  {"calls", calls},
                  {"calls_with_stack", with_stack},
                  {"stacks", stacks}};
  return o;
}

}  // namespace

void add_stack_tools(std::vector<Tool>& t) {
  t.push_back(
      {"get_stacks", "Call stacks of an op",
       "The most frequent (or most expensive, order=total_time) user-space call stacks that led to "
       "one GPU "
       "API op, with native symbols and Python source lines where captured. Says clearly when the "
       "trace has "
       "no stacks." +
           kDataNote,
       object_schema(
           with_window(
               {{"op",
                 {{"type", "string"},
                  {"minLength", 1},
                  {"maxLength", 128},
                  {"description", "The op name, e.g. cudaLaunchKernel"}}},
                {"pid", pid_prop()},
                {"order", {{"type", "string"}, {"enum", {"count", "total_time"}}}},
                {"limit", limit_prop(5, 20, "stacks")},
                {"max_frames",
                 {{"type", "integer"}, {"minimum", 1}, {"maximum", 128}, {"default", 24}}}}),
           {"op"}),
       out_schema({{"op", kStr}, {"captured", kBool}, {"stacks", kArr}},
                  {"op", "captured", "stacks"}),
       get_stacks, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp
