// `ingero export --format perfetto`: Chrome trace-event JSON that ui.perfetto.dev and
// chrome://tracing open. One process track per (node, pid) and a thread track per tid holding
// its calls as complete events; host intervals (a switch out, a block I/O, an allocation
// window) as async slices on tracks of their own, since they cross the thread's calls rather
// than nest in them; causal chains as global instant markers coloured by severity.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/output_file.h"
#include "engine/trace_source.h"

namespace ingero::app {

// Writes the JSON array, one event per line. After a write error it only counts: the error
// is reported once, by finish().
class Emitter {
 public:
  explicit Emitter(OutputFile& out) : out_(out) { status_ = out_.write("[\n"); }
  void emit(const nlohmann::json& j);
  // Ends the array and commits the file (fsync, rename); the first write error otherwise.
  Status finish();
  size_t count() const { return count_; }

 private:
  OutputFile& out_;
  Status status_;
  std::string line_;
  bool first_ = true;
  size_t count_ = 0;
};

// Writes the nodes' calls, host events and chains into `em`. Read errors are left in the
// source's error(). `by_node`: the trace holds several nodes, so each node's window names it.
// `scope`, where given, is told each node before its reads (and nullopt after the last).
void write_perfetto(engine::TraceSource& source, const engine::Window& base,
                    const std::vector<std::string>& nodes, bool by_node,
                    const std::function<void(const std::optional<std::string>&)>& scope,
                    Emitter& em);

}  // namespace ingero::app
