#include "serve/report/flame_tree.h"

#include <algorithm>
#include <cstring>

namespace ingero::serve::report {
namespace {

constexpr size_t kMaxLabel = 160;

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string clip(std::string s) {
  if (s.size() > kMaxLabel) {
    s.resize(kMaxLabel - 3);
    // Never cut a UTF-8 sequence in half.
    while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
    if (!s.empty() && (static_cast<unsigned char>(s.back()) & 0x80)) s.pop_back();
    s += "...";
  }
  return s;
}

}  // namespace

// A frame's whole name: what tells one frame from another.
std::string frame_name(const engine::StackFrameInfo& f) {
  if (f.python) {
    std::string s = f.function.empty() ? "<python>" : f.function;
    if (!f.file.empty()) s += " (" + basename_of(f.file) + ":" + std::to_string(f.line) + ")";
    return s;
  }
  if (!f.function.empty()) return f.function;
  if (!f.address.empty()) return basename_of(f.address);
  return "[unknown]";
}

std::string frame_label(const engine::StackFrameInfo& f) { return clip(frame_name(f)); }

std::string frame_detail(const engine::StackFrameInfo& f) {
  std::string s;
  if (f.python) return f.file + ":" + std::to_string(f.line);
  if (!f.address.empty()) s = f.address;
  if (!f.file.empty()) s += (s.empty() ? "" : " at ") + f.file + ":" + std::to_string(f.line);
  if (s.empty()) s = f.module;
  return s;
}

FlameTree::FlameTree(std::string root_name, size_t max_nodes) : max_nodes_(max_nodes) {
  nodes_.push_back({std::move(root_name), "root", -1, 0, 0, {}});
}

size_t FlameTree::child(size_t parent, const std::string& name, const char* kind,
                        const std::string& detail) {
  // Siblings are told apart by their whole names; the node shows a clipped one. Two template
  // instances alike in their first 157 characters were one frame. A Python frame's name holds
  // its file's base name: two files of one name (each package's utils.py, model.py), each
  // with a `run` calling at line 3, were one frame; its full path tells them apart.
  const std::string key = std::strcmp(kind, "py") == 0 ? name + '\x1f' + detail : name;
  auto it = nodes_[parent].children.find(key);
  if (it != nodes_[parent].children.end()) return it->second;
  if (nodes_.size() >= max_nodes_) {
    truncated_ = true;
    // The root's children must still total every call: past the cap, a stack that would
    // start a new root frame goes under one extra node.
    if (parent != 0) return SIZE_MAX;
    static const std::string kFolded = "[more stacks: node limit reached]";
    if (name != kFolded) return child(0, kFolded, "none", "");
    max_nodes_ = nodes_.size() + 1;
  }
  int64_t loc = -1;
  if (!detail.empty()) {
    auto [li, fresh] = location_index_.try_emplace(detail, int64_t(locations_.size()));
    if (fresh) locations_.push_back(detail);
    loc = li->second;
  }
  nodes_.push_back({clip(name), kind, loc, 0, 0, {}});
  nodes_[parent].children.emplace(key, nodes_.size() - 1);
  return nodes_.size() - 1;
}

void FlameTree::add(const std::vector<engine::StackFrameInfo>& frames, const std::string& leaf,
                    const char* leaf_kind, uint64_t count, uint64_t ns) {
  std::vector<size_t> path{0};
  auto descend = [&](const std::string& name, const char* kind, const std::string& detail) {
    if (path.back() == SIZE_MAX) return;
    size_t c = child(path.back(), name, kind, detail);
    if (c != SIZE_MAX)
      path.push_back(c);
    else
      path.push_back(SIZE_MAX);  // folded: the rest stays in the deepest node reached
  };
  // A native frame with no symbol, file or module ("+0x0": the end of an unwound stack) says
  // nothing: left out.
  auto informative = [](const engine::StackFrameInfo& f) {
    return f.python || !f.function.empty() || !f.file.empty() || !f.module.empty() ||
           (!f.address.empty() && f.address != "+0x0");
  };
  if (std::none_of(frames.begin(), frames.end(), informative)) {
    without_stack_ += count;
    descend("[no stack]", "none", "calls recorded without a stack");
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it)
    if (informative(*it)) descend(frame_name(*it), it->python ? "py" : "native", frame_detail(*it));
  if (!leaf.empty()) descend(leaf, leaf_kind, "");
  for (size_t i : path) {
    if (i == SIZE_MAX) break;
    nodes_[i].value += count;
    nodes_[i].ns += ns;
  }
}

nlohmann::json FlameTree::node_json(size_t i) const {
  const Node& n = nodes_[i];
  nlohmann::json j = {{"name", n.name}, {"value", n.value}, {"t", n.ns}, {"k", n.kind}};
  if (n.loc >= 0) j["li"] = n.loc;
  if (!n.children.empty()) {
    // Widest first: the same layout every time, whatever the names.
    std::vector<size_t> kids;
    for (const auto& [name, c] : n.children) kids.push_back(c);
    std::stable_sort(kids.begin(), kids.end(),
                     [&](size_t a, size_t b) { return nodes_[a].value > nodes_[b].value; });
    nlohmann::json arr = nlohmann::json::array();
    for (size_t c : kids) arr.push_back(node_json(c));
    j["children"] = std::move(arr);
  }
  return j;
}

nlohmann::json FlameTree::to_json() const { return node_json(0); }

}  // namespace ingero::serve::report
