// Causal chains as OTLP log records: one record when the live analysis first finds a chain
// (or finds it at another severity, or again after it was gone for kForgetNs).
//
// A record: severity HIGH -> ERROR (17), MEDIUM -> WARN (13), LOW -> INFO (9), with the
// severity's name as severity_text; the body is the chain's summary; event_name
// "ingero.causal_chain"; attributes ingero.chain.{id, rule, op, vendor, api, root_cause,
// explanation, evidence (one "LAYER op: detail" string per timeline line), fixes, stack (the
// most common stack of its slowest calls, innermost first), window_start_ns, window_end_ns,
// p50_ns, p99_ns, tail_ratio}, process.pid (the first process) and ingero.chain.pids (all),
// ingero.node, and the first process's container.id / k8s.pod.uid when it is in one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/chain.h"
#include "opentelemetry/proto/logs/v1/logs.pb.h"
#include "serve/otlp/resource.h"

namespace ingero::serve::otlp {

// Which chains of an analysis are news. Not thread-safe.
class ChainTracker {
 public:
  static constexpr int64_t kForgetNs = 600'000'000'000LL;  // 10 minutes unseen: a new episode
  // The chains of one analysis at `now_ns` that deserve a record.
  std::vector<const engine::Chain*> fresh(const std::vector<engine::Chain>& chains,
                                          const std::string& node, int64_t now_ns);

 private:
  struct Seen {
    engine::Severity severity;
    int64_t last_ns;
  };
  std::map<std::string, Seen> seen_;  // node + chain id
};

// The record of `c`, found at `now_ns` (Unix ns). `ids`: the first process's container.
void chain_record(const engine::Chain& c, const std::string& node, int64_t now_ns,
                  const ContainerIds& ids, opentelemetry::proto::logs::v1::LogRecord* out);

}  // namespace ingero::serve::otlp
