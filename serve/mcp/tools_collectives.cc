// MCP tools for collectives and the fabric: NCCL/RCCL per rank, InfiniBand/RoCE counters.
#include <algorithm>
#include <map>
#include <sstream>

#include "engine/analysis.h"
#include "engine/exact_quantiles.h"
#include "engine/graphs.h"
#include "serve/mcp/tool_support.h"

namespace ingero::serve::mcp {
namespace {

// Nearest-rank p50 and p99 of durations already in memory (the engine's one definition).
std::pair<uint64_t, uint64_t> p50_p99(const std::vector<uint64_t>& d) {
  engine::ExactQuantiles q({0.50, 0.99});
  for (uint64_t v : d) q.add(0, v);
  q.resolve([&](const engine::ExactQuantiles::Sink& sink) {
    for (uint64_t v : d) sink(0, v);
  });
  return {q.value(0, 0), q.value(0, 1)};
}

ToolOutput get_collectives(ToolContext& ctx, const ToolCall& call) {
  auto op = open_source(ctx);
  if (!op) return error_output(op.error().message);
  auto w = window_of(call.args, *op->source, false);
  if (!w) return error_output(w.error().message);
  auto rep = engine::compute_collectives(*op->source, *w);
  if (!op->error().empty()) return error_output("reading the trace failed: " + op->error());
  Json groups = Json::array();
  std::ostringstream t;
  if (rep.groups.empty()) t << "no NCCL/RCCL collectives in this window\n";
  for (auto& [communicator, ops] : rep.groups) {
    for (auto& [opname, ranks] : ops) {
      Json jr = Json::array();
      char hex[24];
      std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)communicator);
      size_t matched = ranks.empty() ? 0 : ranks.begin()->second.matched;
      t << "comm " << hex << " " << ident(opname) << ": " << ranks.size() << " ranks, " << matched
        << " matched calls\n";
      const engine::CollectiveRank* slow = nullptr;
      for (auto& [rk, r] : ranks) {
        std::vector<uint64_t> d;
        for (size_t i = 0; i < r.starts.size(); ++i)
          d.push_back(uint64_t(std::max<int64_t>(0, r.ends[i] - r.starts[i])));
        auto [p50, p99] = p50_p99(d);
        double score = r.matched ? double(r.last_count) / double(r.matched) : 0.0;
        jr.push_back({{"rank", r.rank},
                      {"nranks", r.nranks},
                      {"pid", r.pid},
                      {"calls", r.starts.size()},
                      {"bytes", r.bytes},
                      {"p50_ns", p50},
                      {"p99_ns", p99},
                      {"median_lag_ns", r.median_lag()},
                      {"last_arrivals", r.last_count},
                      {"slow_rank_score", score},
                      {"wait_imposed_ns", r.wait_imposed_ns},
                      {"barrier_wait_ns", r.barrier_wait_ns},
                      {"barrier_syncs", r.barrier_syncs}});
        if (!slow || r.last_count > slow->last_count) slow = &r;
        t << "  rank " << r.rank << " (pid " << r.pid << "): " << r.starts.size() << " calls, p50 "
          << dur(p50) << " p99 " << dur(p99) << ", median lag "
          << dur(uint64_t(std::max<int64_t>(0, r.median_lag()))) << ", last in " << r.last_count
          << "/" << r.matched << " (score " << fmt("%.2f", score) << "), barrier wait "
          << dur(r.barrier_wait_ns) << "\n";
      }
      Json g = {{"comm", hex}, {"op", opname}, {"ranks", jr}, {"matched", matched}};
      if (slow && matched && ranks.size() > 1) g["slowest_rank"] = slow->rank;
      groups.push_back(std::move(g));
    }
  }
  ToolOutput o;
  o.text = t.str();
  o.structured = {{"vendor", rep.vendor}, {"api", rep.api}, {"groups", groups}};
  return o;
}

ToolOutput get_rdma_counters(ToolContext& ctx, const ToolCall& call) {
  auto r = ctx.engine_reader();
  if (!r) return error_output(r.error().message);
  auto& db = (*r)->db();
  ToolOutput o;
  Json ports = Json::array(), events = Json::array();
  std::ostringstream t;
  std::string device = arg_str(call.args, "device");
  bool errors_only = call.args.value("errors_only", false);
  // The rdma backend's view over device_counters, or the table of files of schema 3-5.
  if (!db.table_exists("rdma_counters") && !db.table_exists("rdma_counters", "temp")) {
    t << "no RDMA counters in this trace (" << (*r)->format_name() << ")\n";
  } else {
    std::string sql =
        "SELECT node, device, port, transport, counter, unit, is_error, count(*), min(timestamp), "
        "max(timestamp), "
        "(SELECT base_value FROM rdma_counters b WHERE b.node = a.node AND b.device = a.device AND "
        "b.port = a.port "
        " AND b.counter = a.counter ORDER BY timestamp, id LIMIT 1), "
        "(SELECT base_value FROM rdma_counters b WHERE b.node = a.node AND b.device = a.device AND "
        "b.port = a.port "
        " AND b.counter = a.counter ORDER BY timestamp DESC, id DESC LIMIT 1), max(state) "
        "FROM rdma_counters a WHERE (?1 = '' OR device = ?1) " +
        std::string(errors_only ? "AND is_error = 1 " : "") +
        "GROUP BY node, device, port, counter ORDER BY node, device, port, is_error DESC, counter "
        "LIMIT 2000";
    auto st = db.prepare(sql);
    if (!st) return error_output(st.error().message);
    st->bind(1, device);
    std::string last_port;
    while (true) {
      auto row = st->step();
      if (!row) return error_output(row.error().message);
      if (!*row) break;
      int64_t first = st->int64(10), last = st->int64(11);
      Json c = {{"node", st->text(0)},
                {"device", st->text(1)},
                {"port", st->int64(2)},
                {"transport", st->text(3)},
                {"counter", st->text(4)},
                {"unit", st->text(5)},
                {"is_error", st->int64(6) != 0},
                {"samples", st->int64(7)},
                {"first_ns", st->int64(8)},
                {"last_ns", st->int64(9)},
                {"first_value", first},
                {"last_value", last},
                {"increase", last >= first ? last - first : last},
                {"state", st->text(12)}};
      std::string port = st->text(1) + "/" + std::to_string(st->int64(2));
      if (port != last_port) {
        t << as_data(st->text(1)) << " port " << st->int64(2) << " (" << as_data(st->text(3))
          << ", " << as_data(st->text(12)) << ")\n";
        last_port = port;
      }
      if (c["increase"].get<int64_t>() || c["is_error"].get<bool>())
        t << "  " << as_data(st->text(4)) << " " << last << " " << ident(st->text(5)) << " (+"
          << c["increase"].get<int64_t>() << " during the trace)"
          << (c["is_error"].get<bool>() ? " [error counter]" : "") << "\n";
      ports.push_back(std::move(c));
    }
    if (ports.empty())
      t << "no RDMA counters: no InfiniBand/RoCE device was present while tracing\n";
  }
  // Asynchronous events (--rdma-verbs), by type.
  if (!(*r)->is_legacy()) {
    auto st = db.prepare(
        "SELECT rdma_event, fabric_error, count(*), min(ts_ns), max(ts_ns), api FROM calls WHERE "
        "kind = 'rdma_event' GROUP BY api, 1, 2 ORDER BY 3 DESC");
    if (!st) return error_output(st.error().message);
    while (true) {
      auto row = st->step();
      if (!row) return error_output(row.error().message);
      if (!*row) break;
      uint64_t type = uint64_t(st->int64(0));
      const auto& event_name = ctx.host().device_event_name;
      std::string name(event_name ? event_name(st->text(5), type) : "");
      if (name.empty()) name = "event " + std::to_string(type);
      events.push_back({{"event", name},
                        {"fabric_error", st->int64(1) != 0},
                        {"count", st->int64(2)},
                        {"first_ns", st->int64(3)},
                        {"last_ns", st->int64(4)}});
      t << "async " << name << ": " << st->int64(2) << (st->int64(1) ? " [fabric error]" : "")
        << "\n";
    }
  }
  o.text = t.str();
  o.structured = {{"counters", ports}, {"async_events", events}};
  return o;
}

}  // namespace

void add_collective_tools(std::vector<Tool>& t) {
  t.push_back({"get_collectives", "NCCL/RCCL collectives per rank",
               "Collectives per communicator, op and rank: call latency p50/p99, median lag behind "
               "the first rank "
               "to arrive, how often each rank arrived last (slow_rank_score = last arrivals / "
               "matched calls; a "
               "straggler approaches 1), the wait it imposed on peers, and barrier wait (the "
               "stream sync after the "
               "collective)." +
                   kDataNote,
               object_schema(with_window({})),
               out_schema({{"vendor", kStr}, {"api", kStr}, {"groups", kArr}}, {"groups"}),
               get_collectives, /*cacheable=*/true});
  t.push_back(
      {"get_rdma_counters", "InfiniBand / RoCE counters",
       "Port counters sampled from sysfs during the trace (first/last value and increase, in bytes "
       "for data "
       "counters; error counters flagged) and libibverbs asynchronous events by type. Errors "
       "rising here, "
       "not TCP retransmits, are the fabric signal on InfiniBand." +
           kDataNote,
       object_schema(
           {{"device", {{"type", "string"}, {"maxLength", 64}, {"description", "e.g. mlx5_0"}}},
            {"errors_only", {{"type", "boolean"}}}}),
       out_schema({{"counters", kArr}, {"async_events", kArr}}, {"counters", "async_events"}),
       get_rdma_counters, /*cacheable=*/true});
}

}  // namespace ingero::serve::mcp
