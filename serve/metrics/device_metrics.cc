// The metrics of the backends' side channels (hal/side_channel.h): polled device counters and
// device asynchronous events. Their names come from the backend's data, not from here.
#include <cctype>

#include "serve/metrics/metrics.h"

namespace ingero::serve {

prometheus::Family<prometheus::Counter>* Metrics::counter_family(const std::string& name,
                                                                 const std::string& help) {
  auto it = device_families_.find(name);
  if (it == device_families_.end())
    it = device_families_
             .emplace(name, &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_))
             .first;
  return it->second;
}

void Metrics::observe_device_event(const hal::Event& ev) {
  uint64_t type = *ev.get(hal::Field::kRdmaEvent);
  std::string_view name = backends_ ? backends_->device_event_name(ev.api, type) : "";
  std::string prefix(ev.vendor);
  counter_family(
      "ingero_" + prefix + "_async_event_total",
      "Device asynchronous events delivered to applications (" + std::string(ev.api) + ")")
      ->Add({{prefix + "_event_type", name.empty() ? "unknown" : std::string(name)},
             {prefix + "_fabric_error", ev.get_or(hal::Field::kFabricError, 0) ? "true" : "false"}})
      .Increment();
}

ingero::Status Metrics::on_device_counters(int64_t, std::string_view backend,
                                           const std::vector<hal::DevicePortSample>& ports) {
  std::lock_guard<std::mutex> g(mu_);
  const std::string prefix(backend);
  for (const auto& p : ports) {
    prometheus::Labels l = {{prefix + "_device", p.device},
                            {prefix + "_port", std::to_string(p.port)}};
    for (const auto& a : p.attributes)
      if (a.metric_label) l[prefix + "_" + a.key] = a.value;
    for (const auto& c : p.counters) {
      std::string name = "ingero_" + prefix + "_" + c.metric;
      if (c.unit == "bytes") name += "_bytes";
      name += "_total";
      for (auto& ch : name)  // VL15_dropped -> vl15_dropped; anything odd -> '_'
        ch = isalnum(static_cast<unsigned char>(ch)) ? char(tolower(static_cast<unsigned char>(ch)))
                                                     : '_';
      uint64_t v = c.value * c.factor;
      auto& last = device_last_[name + '\0' + p.device + '\0' + std::to_string(p.port)];
      // Device counters are cumulative: export the increase since the last read (the first
      // read exports the whole value; a reset restarts from it).
      uint64_t inc = v >= last ? v - last : v;
      counter_family(name, c.help)->Add(l).Increment(double(inc));
      last = v;
    }
  }
  return {};
}

}  // namespace ingero::serve
