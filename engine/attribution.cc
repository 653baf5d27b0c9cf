// Attribution of chains to code: the call stacks of each chain's slowest calls.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>

#include "engine/analysis.h"

namespace ingero::engine {
namespace {

constexpr size_t kSlowestCalls = 20;  // per chain: the slowest calls whose stacks are compared
constexpr size_t kFramesShown = 6;

std::string frame_line(const StackFrameInfo& f) {
  if (f.python)
    return "[Python] " + f.file + ":" + std::to_string(f.line) + " in " + f.function + "()";
  std::string s = f.function.empty() ? "??" : f.function;
  if (!f.file.empty()) s += " at " + f.file + ":" + std::to_string(f.line);
  if (!f.address.empty()) s += " (" + f.address + ")";
  return s;
}

}  // namespace

// The frames a user acts on: those with a source location (Python lines, DWARF file:line);
// without any, those with a function name; without those, the raw frames.
std::vector<std::string> user_frames(const std::vector<StackFrameInfo>& frames) {
  std::vector<std::string> out;
  for (int pass = 0; pass < 3 && out.empty(); ++pass)
    for (const auto& f : frames) {
      bool take = pass == 0   ? (f.python || !f.file.empty())
                  : pass == 1 ? !f.function.empty()
                              : true;
      if (take && out.size() < kFramesShown) out.push_back(frame_line(f));
    }
  return out;
}

namespace {

struct Slow {
  uint64_t dur = 0;
  uint64_t stack = 0;
  uint32_t pid = 0, tid = 0;
};

// Keeps the kSlowestCalls slowest in `v`: a min-heap on duration (of equals, the first kept).
void keep_slowest(std::vector<Slow>& v, const Slow& s) {
  auto cmp = [](const Slow& x, const Slow& y) { return x.dur > y.dur; };
  if (v.size() < kSlowestCalls) {
    v.push_back(s);
    std::push_heap(v.begin(), v.end(), cmp);
  } else if (s.dur > v.front().dur) {
    std::pop_heap(v.begin(), v.end(), cmp);
    v.back() = s;
    std::push_heap(v.begin(), v.end(), cmp);
  }
}

// The stacks most common among a chain's slowest calls (ties: the slowest first), two at most.
std::vector<ChainStack> ranked_stacks(const std::vector<Slow>& v) {
  std::map<uint64_t, ChainStack> by;
  for (const auto& s : v) {
    ChainStack& cs = by[s.stack];
    cs.stack_id = s.stack;
    ++cs.calls;
    if (s.dur >= cs.worst_ns) {
      cs.worst_ns = s.dur;
      cs.pid = s.pid;
      cs.tid = s.tid;
    }
  }
  std::vector<ChainStack> ranked;
  for (auto& [id, cs] : by) {
    cs.examined = v.size();
    ranked.push_back(cs);
  }
  std::sort(ranked.begin(), ranked.end(), [](const ChainStack& x, const ChainStack& y) {
    return std::tie(x.calls, x.worst_ns) > std::tie(y.calls, y.worst_ns);
  });
  if (ranked.size() > 2) ranked.resize(2);
  return ranked;
}

using Wanted = std::map<std::pair<std::string, uint32_t>, std::vector<size_t>>;

// A call of a wanted op: among the slowest of each chain about it whose window holds it.
void consider_call(const Analysis& a, const Wanted& want, const KeptCall& k,
                   std::vector<std::vector<Slow>>& slow) {
  std::string op(k.op);
  for (uint32_t pid : {k.pid, 0u}) {
    auto it = want.find({op, pid});
    if (it == want.end()) continue;
    for (size_t ci : it->second) {
      const Chain& c = a.chains[ci];
      if (c.window_end > c.window_start && (k.ts < c.window_start || k.ts > c.window_end)) continue;
      keep_slowest(slow[ci], {k.dur, k.stack, k.pid, k.tid});
    }
  }
}

// Each chain's slowest calls from those the op statistics kept (in the order read, as a read
// of the calls gives them): true where that is every chain's answer.
// `ops`: those of `want`.
bool from_kept(const Analysis& a, const Wanted& want,
               const std::unordered_set<std::string_view>& ops,
               std::vector<std::vector<Slow>>& slow) {
  const KeptCalls* kept = a.stats.kept.get();
  if (!kept) return false;
  kept->for_each([&](const KeptCall& k) {
    if (k.stack && ops.count(k.op)) consider_call(a, want, k, slow);
  });
  for (const auto& [key, chains] : want) {
    uint64_t missed = kept->missed(key.first, key.second);
    for (size_t ci : chains)
      if (slow[ci].size() < kSlowestCalls || slow[ci].front().dur < missed) return false;
  }
  return true;
}

}  // namespace

void attribute_stacks(TraceSource& source, Analysis& a, std::mutex* stacks_lock) {
  // Every read but the calls' holds the lock: the step model's threads read stacks meanwhile.
  auto locked = [stacks_lock] {
    return stacks_lock ? std::unique_lock<std::mutex>(*stacks_lock)
                       : std::unique_lock<std::mutex>();
  };
  if (a.chains.empty()) return;
  {
    auto hold = locked();
    if (!source.has_stacks()) return;
  }
  // (op, pid) -> chains that name them; pid 0 = the chain names no process.
  Wanted want;
  for (size_t i = 0; i < a.chains.size(); ++i) {
    Chain& c = a.chains[i];
    if (c.stacks_sought) continue;
    c.stacks_sought = true;
    if (c.op.empty() || !c.stacks.empty()) continue;  // rules that located their evidence
    if (c.pids.empty()) want[{c.op, 0}].push_back(i);
    for (uint32_t p : c.pids) want[{c.op, p}].push_back(i);
  }
  if (want.empty()) return;
  // The pass looks at every call: most are of no chain's op, and are let go on a look-up of
  // the name (no string made of it), and only the time the chains span is read.
  std::unordered_set<std::string_view> ops;
  Window read = a.window;
  int64_t from = INT64_MAX, to = INT64_MIN;
  for (const auto& [key, chains] : want) {
    ops.insert(key.first);
    for (size_t ci : chains) {
      const Chain& c = a.chains[ci];
      bool bounded = c.window_end > c.window_start;
      from = std::min(from, bounded ? c.window_start : INT64_MIN);
      to = std::max(to, bounded ? c.window_end : INT64_MAX);
    }
  }
  read.from_ns = std::max(read.from_ns, from);
  read.to_ns = std::min(read.to_ns, to);
  std::vector<std::vector<Slow>> slow(a.chains.size());
  auto consider = [&](const hal::Event& e) {
    // A call seen at entry only has no duration of its own to rank by (as the kept calls).
    if (!e.timed || !e.stack_id || !ops.count(e.op)) return;
    consider_call(a, want, {int64_t(e.ts_ns), e.dur_ns, e.stack_id, e.pid, e.tid, e.op}, slow);
  };
  // The calls the op statistics kept hold every chain's slowest where, for each, at least
  // kSlowestCalls were kept and none passed over was as slow as the fastest of them.
  if (!from_kept(a, want, ops, slow)) {
    for (auto& v : slow) v.clear();
    // A run's calls count only where a chain is about its op.
    source.call_runs(read, consider, [&](const CallRun& r) {
      if (!ops.count(r.op)) return;
      std::string op(r.op);
      if (want.count({op, r.pid}) || want.count({op, 0u})) r.for_each_timed_call(consider);
    });
  }
  std::map<uint64_t, std::vector<std::string>> frames_of;
  for (size_t ci = 0; ci < a.chains.size(); ++ci) {
    auto& v = slow[ci];
    if (v.empty()) continue;
    std::vector<ChainStack> ranked = ranked_stacks(v);
    for (auto& cs : ranked) {
      auto it = frames_of.find(cs.stack_id);
      if (it == frames_of.end()) {
        auto hold = locked();
        it = frames_of.emplace(cs.stack_id, user_frames(source.stack(cs.stack_id))).first;
      }
      cs.frames = it->second;
      if (!cs.frames.empty()) a.chains[ci].stacks.push_back(cs);
    }
  }
}

}  // namespace ingero::engine
