#include "serve/otlp/log_records.h"

#include "serve/otlp/attributes.h"

namespace ingero::serve::otlp {

namespace pl = opentelemetry::proto::logs::v1;

std::vector<const engine::Chain*> ChainTracker::fresh(const std::vector<engine::Chain>& chains,
                                                      const std::string& node, int64_t now_ns) {
  std::vector<const engine::Chain*> out;
  for (const auto& c : chains) {
    std::string key = node + '\0' + c.id;
    auto it = seen_.find(key);
    if (it == seen_.end() || it->second.severity != c.severity ||
        now_ns - it->second.last_ns >= kForgetNs)
      out.push_back(&c);
    seen_[key] = {c.severity, now_ns};
  }
  for (auto it = seen_.begin(); it != seen_.end();)
    it = now_ns - it->second.last_ns >= kForgetNs ? seen_.erase(it) : std::next(it);
  return out;
}

void chain_record(const engine::Chain& c, const std::string& node, int64_t now_ns,
                  const ContainerIds& ids, pl::LogRecord* r) {
  r->set_time_unix_nano(uint64_t(now_ns));
  r->set_observed_time_unix_nano(uint64_t(now_ns));
  switch (c.severity) {
    case engine::Severity::kHigh:
      r->set_severity_number(pl::SEVERITY_NUMBER_ERROR);
      break;
    case engine::Severity::kMedium:
      r->set_severity_number(pl::SEVERITY_NUMBER_WARN);
      break;
    case engine::Severity::kLow:
      r->set_severity_number(pl::SEVERITY_NUMBER_INFO);
      break;
  }
  r->set_severity_text(engine::severity_name(c.severity));
  r->mutable_body()->set_string_value(hal::valid_utf8(c.summary));
  r->set_event_name("ingero.causal_chain");
  auto* a = r->mutable_attributes();
  add_attr(a, "ingero.chain.id", c.id);
  add_attr(a, "ingero.chain.rule", c.rule);
  if (!c.op.empty()) add_attr(a, "ingero.chain.op", c.op);
  if (!c.vendor.empty()) add_attr(a, "ingero.chain.vendor", c.vendor);
  if (!c.api.empty()) add_attr(a, "ingero.chain.api", c.api);
  if (!c.pids.empty()) {
    add_attr(a, "process.pid", int64_t(c.pids.front()));
    std::vector<int64_t> pids(c.pids.begin(), c.pids.end());
    add_attr(a, "ingero.chain.pids", pids);
  }
  if (!node.empty() || !c.node.empty()) add_attr(a, "ingero.node", c.node.empty() ? node : c.node);
  if (!ids.container_id.empty()) add_attr(a, "container.id", ids.container_id);
  if (!ids.pod_uid.empty()) add_attr(a, "k8s.pod.uid", ids.pod_uid);
  add_attr(a, "ingero.chain.root_cause", c.root_cause);
  add_attr(a, "ingero.chain.explanation", c.explanation);
  std::vector<std::string> evidence;
  for (const auto& t : c.timeline) evidence.push_back(t.layer + " " + t.op + ": " + t.detail);
  add_attr(a, "ingero.chain.evidence", evidence);
  add_attr(a, "ingero.chain.fixes", c.fixes);
  if (!c.stacks.empty() && !c.stacks.front().frames.empty())
    add_attr(a, "ingero.chain.stack", c.stacks.front().frames);
  if (c.window_start) add_attr(a, "ingero.chain.window_start_ns", int64_t(c.window_start));
  if (c.window_end) add_attr(a, "ingero.chain.window_end_ns", int64_t(c.window_end));
  if (c.p50_ns) add_attr(a, "ingero.chain.p50_ns", int64_t(c.p50_ns));
  if (c.p99_ns) add_attr(a, "ingero.chain.p99_ns", int64_t(c.p99_ns));
  if (c.tail_ratio > 0) add_attr(a, "ingero.chain.tail_ratio", c.tail_ratio);
}

}  // namespace ingero::serve::otlp
