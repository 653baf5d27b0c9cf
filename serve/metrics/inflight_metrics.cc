// Calls in flight as Prometheus gauges (capture/inflight_monitor.h): set once a second from the
// tracer's report, so an alert fires while a call hangs, not after it returned.
#include <algorithm>

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
}

ingero::Status Metrics::on_inflight(const hal::InflightReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t calls = 0, oldest_ns = 0;
  for (const auto& r : report.current) {
    if (r.what != hal::Inflight::What::kCall) continue;
    ++calls;
    oldest_ns = std::max<uint64_t>(oldest_ns, r.call.dur_ns);
  }
  inflight_calls_->Set(double(calls));
  inflight_oldest_->Set(double(oldest_ns) / 1e9);
  return {};
}

}  // namespace ingero::serve
