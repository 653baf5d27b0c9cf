// SqlTraceSource's latency sketches of calls folded into runs: the per-second summaries
// (call_seconds), and the calls after the last second summarised.
#include "store/op_dictionary.h"
#include "store/read_snapshot.h"
#include "store/sketch_sql.h"
#include "store/sql_trace_source.h"
#include "store/unsummarised_calls.h"

namespace ingero::store {

namespace {

// The sketches of the calls no summary counts yet (store/unsummarised_calls.h), as compact
// will write them: only timed calls, those whose second overlaps the window.
using SketchesByOp =
    std::map<std::tuple<uint32_t, std::string, std::string, std::string>, engine::QuantileSketch>;

ingero::Status add_unsummarised_sketches(Db& db, const engine::Window& secs,
                                         const engine::Window& w, SketchesByOp& m) {
  auto unended = unended_sessions(db);
  if (!unended) return unended.error();
  if (unended->empty()) return {};  // every session ended: every call is summarised
  // (source, op) -> vendor, api, op name: the dictionary every reader of calls joins.
  std::map<std::pair<int, int>, std::tuple<std::string, std::string, std::string>> names;
  if (auto st = for_each_op(db, OpVendors::kAll,
                            [&](const OpEntry& o) {
                              names[{int(o.source), int(o.op)}] = {
                                  std::string(o.vendor), std::string(o.api), std::string(o.name)};
                            });
      !st)
    return st.error();
  return for_each_unsummarised_call(
      db, [&](std::string_view node, int64_t, const SummarizedCall& c) {
        if (!c.timed || (w.pid && c.pid != *w.pid) || (w.node && node != *w.node)) return;
        constexpr int64_t kSecond = 1000000000;
        int64_t second =
            (c.ts_ns >= 0 ? c.ts_ns / kSecond : (c.ts_ns - kSecond + 1) / kSecond) * kSecond;
        if (second < secs.from_ns || second > secs.to_ns) return;
        auto n = names.find({c.source, c.op});
        if (n == names.end()) return;
        const auto& [vendor, api, op] = n->second;
        m[{c.pid, vendor, api, op}].add(c.dur_ns);
      });
}

}  // namespace

std::optional<std::vector<engine::CallSketch>> SqlTraceSource::folded_call_sketches(
    const engine::Window& w) {
  // The seconds summarised and the calls after them as of one commit: a second summarised
  // between the two reads was in neither.
  ReadSnapshot snapshot(reader_.db());
  if (!has_folded_calls(w) || !reader_.db().table_exists("call_seconds")) return std::nullopt;
  // The seconds that overlap the window: a summary covers the calls that started in its second.
  engine::Window secs = w;
  secs.from_ns = w.from_ns == INT64_MIN ? w.from_ns : w.from_ns - 999999999;
  auto st = prepare(
      "SELECT c.pid, s.vendor, s.api, o.name, c.sketch FROM call_seconds c "
      "JOIN sources s ON s.id = c.source JOIN ops o ON o.source_id = c.source AND o.op_id = c.op" +
      window_sql(secs, "c.timestamp", false, false) +
      (w.pid ? " AND c.pid = " + std::to_string(*w.pid) : std::string()) +
      (w.node ? " AND c.node = " + sql_quote(*w.node) : std::string()));
  if (!st) return std::nullopt;
  SketchesByOp m;
  while (row(*st)) {
    auto sk = sketch_column(st->get(), 4);
    if (!sk) {
      fail(ingero::make_error(reader_.db().path() + ": a damaged call_seconds sketch"));
      return std::nullopt;
    }
    m[{uint32_t(st->int64(0)), st->text(1), st->text(2), st->text(3)}].merge(*sk);
  }
  if (auto rest = add_unsummarised_sketches(reader_.db(), secs, w, m); !rest) {
    fail(rest.error());
    return std::nullopt;
  }
  std::vector<engine::CallSketch> out;
  for (auto& [k, sk] : m)
    out.push_back({std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), std::move(sk)});
  return out;
}

}  // namespace ingero::store
