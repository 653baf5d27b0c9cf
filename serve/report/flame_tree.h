// A flame graph's tree, in the shape d3-flame-graph draws: {name, value, children}, plus
// `t` (total ns of the calls under the node), `k` (what the node is: "root", "py" a Python
// frame, "native", "op" the GPU API call at the top of a stack, "none" for calls without a
// stack) and `li` (the frame's full location, for the tooltip: an index into locations(),
// which holds each distinct location once; long paths repeat in many nodes).
//
// Stacks are stored innermost frame first; the tree grows from the outermost frame, so the
// root's children are the programs' entry points and the GPU calls are the flames' tips.
// A node's value is the sum of its children's plus the calls that ended there. The number of
// nodes is capped: past the cap a stack's remaining frames are folded into the deepest node
// it reached (truncated() tells), so the totals stay exact.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/trace_source.h"

namespace ingero::serve::report {

// "step (train.py:57)" for Python frames; the demangled function (or the address when it
// did not resolve) for native ones; at most 160 characters.
std::string frame_label(const engine::StackFrameInfo& f);
// "/src/train.py:57", "libtorch_cuda.so+0x1a2b at aten/foo.cpp:12".
std::string frame_detail(const engine::StackFrameInfo& f);

class FlameTree {
 public:
  FlameTree(std::string root_name, size_t max_nodes);
  // Adds `count` calls (or samples) totalling `ns` under `frames` (innermost first), topped by
  // a `leaf` node of kind `leaf_kind` when `leaf` is not empty. No frames: the calls go under
  // a "[no stack]" node.
  void add(const std::vector<engine::StackFrameInfo>& frames, const std::string& leaf,
           const char* leaf_kind, uint64_t count, uint64_t ns);
  nlohmann::json to_json() const;
  nlohmann::json locations() const { return locations_; }
  uint64_t total() const { return nodes_[0].value; }
  uint64_t without_stack() const { return without_stack_; }  // under "[no stack]"
  size_t size() const { return nodes_.size(); }
  bool truncated() const { return truncated_; }

 private:
  struct Node {
    std::string name, kind;
    int64_t loc = -1;  // index into locations_
    uint64_t value = 0, ns = 0;
    std::map<std::string, size_t> children;  // by name (a Python frame's: and its full path)
  };
  size_t child(size_t parent, const std::string& name, const char* kind, const std::string& detail);
  nlohmann::json node_json(size_t i) const;

  std::vector<Node> nodes_;
  std::vector<std::string> locations_;
  std::map<std::string, int64_t> location_index_;
  size_t max_nodes_;
  bool truncated_ = false;
  uint64_t without_stack_ = 0;
};

}  // namespace ingero::serve::report
