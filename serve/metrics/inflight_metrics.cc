// Calls in flight as Prometheus gauges (capture/inflight_monitor.h): set once a second from the
// tracer's report, so an alert fires while a call hangs, not after it returned.
#include <algorithm>

#include "engine/hangs.h"
#include "serve/metrics/metrics.h"

namespace ingero::serve {

void Metrics::make_inflight_gauges() {
  inflight_calls_ = &prometheus::BuildGauge()
                         .Name("ingero_inflight_calls")
                         .Help("Traced GPU calls in flight for longer than --inflight-after now")
                         .Register(*registry_)
                         .Add({});
  inflight_oldest_ = &prometheus::BuildGauge()
                          .Name("ingero_inflight_oldest_seconds")
                          .Help(
                              "How long the oldest traced call in flight has been inside, in "
                              "seconds (0: none in flight longer than --inflight-after)")
                          .Register(*registry_)
                          .Add({});
  collective_hang_ = &prometheus::BuildGauge()
                          .Name("ingero_collective_hang")
                          .Help(
                              "Ranks on this node waiting inside a collective (the same one of "
                              "their communicator) for longer than --inflight-after now (0: none)")
                          .Register(*registry_)
                          .Add({});
}

ingero::Status Metrics::on_inflight(const hal::InflightReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t calls = 0, oldest_ns = 0;
  for (const auto& r : report.current) {
    if (r.what != hal::Inflight::What::kCall) continue;
    ++calls;
    oldest_ns = std::max<uint64_t>(oldest_ns, r.call.dur_ns);
  }
  // The tracer's live analysis of its own node's ranks: the engine's (engine/hangs.h), over
  // the threads stuck now.
  std::vector<engine::InflightRow> rows;
  rows.reserve(report.current.size());
  for (const auto& r : report.current) rows.push_back({"", r});
  size_t hung = 0;
  for (const auto& h : engine::find_collective_hangs(rows, {}, report.after_ns)) hung += h.inside();
  collective_hang_->Set(double(hung));
  inflight_calls_->Set(double(calls));
  inflight_oldest_->Set(double(oldest_ns) / 1e9);
  return {};
}

}  // namespace ingero::serve
