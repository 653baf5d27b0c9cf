// The step model, part 0: the top-level calls of each GPU process, as compact items.
#include <algorithm>
#include <future>
#include <optional>
#include <set>

#include "engine/steps_internal.h"
#include "engine/thresholds_steps.h"
#include "hal/memory.h"

namespace ingero::engine::steps_detail {

Cat category(const hal::Event& e) {
  using K = hal::EventKind;
  switch (e.kind) {
    case K::kSync:
      return kWait;
    case K::kMemcpy:
      // The host needs the data: a device-to-host copy waits for the work queued before it.
      return e.get_or(hal::Field::kDirection, 99) == uint64_t(hal::CopyDirection::kDeviceToHost)
                 ? kWait
                 : kEnqueue;
    case K::kLaunch:
    case K::kGraphLaunch:
    case K::kMemset:
    case K::kCollective:
    case K::kP2P:
    case K::kStreamWait:
    case K::kGroup:
      return kEnqueue;
    default:
      return kApi;
  }
}

bool puts_work(hal::EventKind k) {
  using K = hal::EventKind;
  return k == K::kLaunch || k == K::kGraphLaunch || k == K::kMemcpy || k == K::kMemset ||
         k == K::kCollective || k == K::kP2P;
}

namespace {

Call make_call(const hal::Event& e, uint32_t op) {
  Call c;
  c.start = int64_t(e.ts_ns);
  c.end = c.start + int64_t(e.dur_ns);
  c.tid = e.tid;
  c.op = op;
  c.kind = e.kind;
  c.cat = category(e);
  uint64_t dir = e.get_or(hal::Field::kDirection, 99);
  c.d2h = e.kind == hal::EventKind::kMemcpy && dir == uint64_t(hal::CopyDirection::kDeviceToHost);
  // A device-to-host copy is the host waiting for data, not work left running: whether it is
  // synchronous is not visible, so it neither keeps its stream busy nor drains it.
  c.work = puts_work(e.kind) && !c.d2h;
  c.h2d = e.kind == hal::EventKind::kMemcpy && dir == uint64_t(hal::CopyDirection::kHostToDevice);
  // Work without a stream argument goes to the default stream.
  c.stream = e.get_or(hal::Field::kStream, c.work ? 0 : kNoStream);
  c.stack = e.stack_id;
  c.bytes = e.get_or(hal::Field::kBytes, 0);
  c.estimated = !e.timed;
  return c;
}

// Room for n items in huge pages (hal/memory.h): for the call list, explain at 10 M folded
// events went from 7.4-7.7 s to 6.6-6.8 s on the 2-vCPU VM.
template <class T>
void reserve_huge(std::vector<T>& v, size_t n) {
  v.reserve(n);
  hal::advise_huge_pages(v.data(), v.capacity() * sizeof(T));
}

// Appends to a list: one reserved ahead takes no copy; one whose size was not known (the model
// began before the calls were counted) grows by doubling, in huge pages too.
template <class T>
void push_huge(std::vector<T>& v, const T& x) {
  if (v.size() == v.capacity()) reserve_huge(v, std::max<size_t>(4096, v.capacity() * 2));
  v.push_back(x);
}

// What the model may still hold, in bytes: an item takes 56; a grouped call 8, a group 32 for
// its list and a stack grouped calls share 48 (interned); a folded run's counts 32 more. Once it is
// spent the model stops at that point in time: every later call is dropped, so what is
// modelled is a prefix of the trace.
struct Budget {
  size_t bytes = 0;
  bool full = false;
  bool take(size_t n) {
    if (full || bytes < n) return !(full = true);
    bytes -= n;
    return true;
  }
  bool take_item() { return take(sizeof(Call)); }
};

uint32_t op_of(Proc& p, std::string_view op, std::string_view api, hal::EventKind kind) {
  auto [it, fresh] = p.op_index.try_emplace({op.data(), api.data()}, uint32_t(p.ops.size()));
  if (fresh) {
    TopLevelOp o;
    o.op = std::string(op);
    o.api = std::string(api);
    o.kind = kind;
    p.ops.push_back(std::move(o));
  }
  return it->second;
}

// The index of `stack` in p.stacks where it is interned already. A few recent answers first: a
// step's launches cycle through a few dozen stacks, and the table's look-up (a hash and a
// division) was most of the time spent grouping.
std::pair<uint64_t, uint32_t>& recent_slot(Proc& p, uint64_t stack) {
  return p.recent_stacks[(stack * 0x9E3779B97F4A7C15ull) >> 58];
}
std::optional<uint32_t> interned(Proc& p, uint64_t stack) {
  auto& recent = recent_slot(p, stack);
  if (recent.second != UINT32_MAX && recent.first == stack) return recent.second;
  auto it = p.stack_index.find(stack);
  if (it == p.stack_index.end()) return std::nullopt;
  recent = {stack, it->second};
  return it->second;
}

// Whether call c may join `last`, the thread's previous item, as its next call: alike in every
// field of an item but time and stack, not a wait, after it ends, its start within 32 bits of
// the item's, its duration (and the item's first call's) and the stacks within a Grouped.
bool joins(Proc& p, const Call& last, const Call& c) {
  if (!group_calls || c.cat == kWait || last.kind != c.kind || last.op != c.op ||
      last.stream != c.stream || last.bytes != c.bytes || last.cat != c.cat ||
      last.work != c.work || last.d2h != c.d2h || last.h2d != c.h2d || c.start < last.end)
    return false;
  if (last.run != kNoRun && !Proc::grouped(last)) return false;  // a folded run stays as read
  if (uint64_t(c.start - last.start) > UINT32_MAX || uint64_t(c.end - c.start) > Grouped::kMaxDur ||
      uint64_t(p.first(last).dur) > Grouped::kMaxDur)
    return false;
  // Stacks interned past kMaxStack do not fit; new ones fit while there is room (counted as if
  // both were new).
  size_t fresh = 0;
  auto fits = [&](uint64_t stack) {
    auto i = interned(p, stack);
    if (!i) ++fresh;
    return !i || *i <= Grouped::kMaxStack;
  };
  return (Proc::grouped(last) || fits(last.stack)) && fits(c.stack) &&
         p.stacks.size() + fresh <= size_t(Grouped::kMaxStack) + 1;
}

// The index of `stack` in p.stacks, interned on first use.
constexpr size_t kInternedStackBytes = 48;  // the id and its hash-table node
bool intern(Proc& p, uint64_t stack, Budget& b, uint32_t& out) {
  if (auto i = interned(p, stack)) {
    out = *i;
    return true;
  }
  if (p.stacks.size() >= UINT32_MAX || !b.take(kInternedStackBytes)) return false;
  out = uint32_t(p.stacks.size());
  p.stack_index.emplace(stack, out);
  p.stacks.push_back(stack);
  recent_slot(p, stack) = {stack, out};
  return true;
}

// Adds call c to the thread's previous item: a group of exact calls.
bool join(Proc& p, Call& last, const Call& c, Budget& b) {
  uint32_t stack = 0;
  if (last.run == kNoRun) {
    uint32_t first = 0;
    if (p.groups.size() >= kGroupBit || !intern(p, last.stack, b, first) ||
        !b.take(sizeof(Grouped) + sizeof(GroupList)))
      return false;
    if (p.newest_group.size() <= last.op) p.newest_group.resize(last.op + 1, UINT32_MAX);
    uint32_t& newest = p.newest_group[last.op];
    size_t room = newest != UINT32_MAX ? p.groups[newest].size() : 2;
    newest = uint32_t(p.groups.size());
    p.groups.emplace_back(p.group_pool.get()).reserve(std::max<size_t>(room, 2));
    p.groups.back().push_back({0, uint64_t(last.end - last.start), first});
    last.run = kGroupBit | newest;
  }
  if (!intern(p, c.stack, b, stack) || !b.take(sizeof(Grouped))) return false;
  p.groups[last.run & ~kGroupBit].push_back(
      {uint32_t(c.start - last.start), uint64_t(c.end - c.start), stack});
  last.end = c.end;
  last.estimated = c.estimated;
  return true;
}

// The thread's item ends by `to` (< its end): its last call, seen at entry only, read back with
// its op's mean duration, and the thread's next call starts at `to`: it had returned by then.
void cut_estimate(Proc& p, Call& item, int64_t to) {
  auto cut = uint64_t(item.end - to);
  p.ops[item.op].sum_ns -= cut;
  if (Proc::grouped(item)) {
    Grouped& last = p.groups[item.run & ~kGroupBit].back();
    last = Grouped(last.delta, last.dur() - cut, last.stack());
  }
  item.end = to;
}

// A caller recorded after its callee (same start, longer): the callee, the last call of the
// thread's item, is part of the caller.
void drop_last(Proc& p, Call& item) {
  TopLevelOp& was = p.ops[item.op];
  --was.calls;
  ++was.nested;
  if (!Proc::grouped(item)) {
    was.sum_ns -= uint64_t(item.end - item.start);
    return;
  }
  auto& g = p.groups[item.run & ~kGroupBit];  // two calls or more: one stays
  was.sum_ns -= g.back().dur();
  g.pop_back();
  item.end = item.start + int64_t(g.back().delta) + int64_t(g.back().dur());
}

// A call nested in time inside another call of the same thread (a runtime call's driver call,
// a collective's internal copies) is part of it: only the outermost call is modelled.
// Consecutive calls of one op on a thread, alike but for their times, are grouped into one item.
void collect(const hal::Event& e, Proc& p, Budget& b) {
  uint32_t op = op_of(p, e.op, e.api, e.kind);
  Call c = make_call(e, op);
  auto open = p.open.find(e.tid);
  if (open != p.open.end()) {
    Call& outer = p.calls[open->second.last];
    bool folded = outer.run != kNoRun && !Proc::grouped(outer);
    int64_t last = p.last_start(outer);
    // A call after an untimed one of its thread is not inside it: the untimed call's end is its
    // op's mean, which one slow timed call can lift past the thread's next calls (nested in
    // BPF, a launch's own driver call never comes as a call of its own).
    if (outer.estimated && !folded && c.start > last && c.start < outer.end)
      cut_estimate(p, outer, c.start);
    if (c.start == last && c.end > outer.end && !folded) {
      // Same start and longer: this is the caller, recorded after its callee.
      drop_last(p, outer);
      if (outer.run == kNoRun) {
        if (b.full || open->second.last + 1 != p.calls.size()) {  // in its place
          outer = c;
          ++p.ops[op].calls;
          p.ops[op].sum_ns += e.dur_ns;
          return;
        }
        // The callee is the newest item: out, so that the caller can join the item before it.
        p.calls.pop_back();
        b.bytes += sizeof(Call);
        open->second = {open->second.prev, SIZE_MAX};
        if (open->second.last == SIZE_MAX) {
          p.open.erase(open);
          open = p.open.end();
        }
      }
    } else if (c.start < outer.end || (c.start == last && c.end <= outer.end)) {
      ++p.ops[op].nested;
      return;
    }
  }
  if (b.full) {
    ++p.dropped;
    return;
  }
  if (open != p.open.end() && joins(p, p.calls[open->second.last], c)) {
    if (!join(p, p.calls[open->second.last], c, b)) {
      ++p.dropped;
      return;
    }
  } else {
    if (!b.take_item()) {
      ++p.dropped;
      return;
    }
    size_t prev = open != p.open.end() ? open->second.last : SIZE_MAX;
    p.open[e.tid] = {p.calls.size(), prev};
    push_huge(p.calls, c);
  }
  ++p.ops[op].calls;
  p.ops[op].sum_ns += e.dur_ns;
}

// A folded run: its calls are top-level launches (folding takes no nested call), kept as one
// item. A run of one call is that call.
void collect_run(const CallRun& r, Proc& p, Budget& b, hal::Event& scratch) {
  r.call(0, r.ts_ns, scratch);
  if (r.calls == 1) {
    collect(scratch, p, b);
    return;
  }
  if (!b.take(sizeof(Call) + sizeof(RunCounts))) {
    p.dropped += r.calls;
    return;
  }
  Call c = make_call(scratch, op_of(p, r.op, r.api, r.kind));
  c.end = r.ts_ns + int64_t(r.span_ns);
  c.run = uint32_t(p.runs.size());
  push_huge(p.runs, RunCounts{r.calls, r.sum_ns, r.min_ns, r.max_ns});
  auto open = p.open.find(r.tid);
  p.open[r.tid] = {p.calls.size(), open != p.open.end() ? open->second.last : SIZE_MAX};
  push_huge(p.calls, c);
  p.ops[c.op].calls += r.calls;
  p.ops[c.op].sum_ns += r.sum_ns;
}

}  // namespace

std::unique_ptr<std::pmr::unsynchronized_pool_resource> new_group_pool() {
  std::pmr::pool_options o;
  o.largest_required_pool_block = size_t(64) << 10;  // 5,461 calls; longer lists from upstream
  o.max_blocks_per_chunk = size_t(1) << 16;          // chunks of up to 64 MiB, in huge pages
  return std::make_unique<std::pmr::unsynchronized_pool_resource>(o, hal::huge_page_resource());
}

namespace {

// The calls of the processes `mine` accepts, with `budget`: what collect_calls() gives of them.
template <class Mine>
std::map<uint32_t, Proc> collect_some(TraceSource& source, const Window& w, Budget& budget,
                                      const std::map<uint32_t, uint64_t>& calls_per_pid,
                                      const Mine& mine) {
  std::map<uint32_t, Proc> procs;
  const size_t max_bytes = budget.bytes;
  // Room, not memory: pages are only faulted in as the lists fill. Runs hold two calls or
  // more; growing their counts by doubling instead copied and faulted them twice over.
  for (const auto& [pid, n] : calls_per_pid) {
    if (!mine(pid)) continue;
    reserve_huge(procs[pid].calls, size_t(std::min<uint64_t>(n, max_bytes / sizeof(Call))));
    reserve_huge(procs[pid].runs, size_t(std::min<uint64_t>(n / 2, max_bytes / sizeof(RunCounts))));
  }
  auto on_call = [&](const hal::Event& e) {
    if (hal::is_host_kind(e.kind) || !mine(e.pid)) return;
    Proc& p = procs[e.pid];
    p.pid = e.pid;
    collect(e, p, budget);
  };
  hal::Event scratch;
  source.call_runs(w, on_call, [&](const CallRun& r) {
    if (!mine(r.pid)) return;
    Proc& p = procs[r.pid];
    p.pid = r.pid;
    collect_run(r, p, budget, scratch);
  });
  std::erase_if(procs, [](const auto& kv) { return kv.second.pid == 0; });  // hinted, no calls
  // Start order, whatever order the source gave rows and runs in.
  for (auto& [pid, p] : procs) {
    auto by_start = [](const Call& x, const Call& y) { return x.start < y.start; };
    if (!std::is_sorted(p.calls.begin(), p.calls.end(), by_start))
      std::stable_sort(p.calls.begin(), p.calls.end(), by_start);
  }
  return procs;
}

}  // namespace

std::map<uint32_t, Proc> collect_calls(TraceSource& source, const Window& w, size_t max_bytes,
                                       const std::map<uint32_t, uint64_t>& calls_per_pid,
                                       unsigned threads) {
  auto every = [](uint32_t) { return true; };
  threads = std::min<unsigned>(threads, unsigned(calls_per_pid.size()));
  if (threads < 2 || !source.concurrent_call_reads(w)) {
    Budget budget{max_bytes};
    return collect_some(source, w, budget, calls_per_pid, every);
  }
  // Several ranks: each thread reads every call (from memory) and collects its own processes'.
  // Each may spend the whole budget; where together they spent more than it, the one budget
  // would have stopped the model earlier, and the calls are collected again on this thread, as
  // one collection does: the model is the same whatever the threads.
  std::vector<uint32_t> pids;
  for (const auto& [pid, n] : calls_per_pid) pids.push_back(pid);
  std::vector<std::map<uint32_t, Proc>> parts(threads);
  std::vector<Budget> budgets(threads, Budget{max_bytes});
  auto part = [&](unsigned i) {
    std::set<uint32_t> own;
    for (size_t k = i; k < pids.size(); k += threads) own.insert(pids[k]);
    // A process no count named (it made calls only after the counts) goes to the first part.
    auto mine = [&](uint32_t pid) {
      return own.count(pid) || (i == 0 && !calls_per_pid.count(pid));
    };
    parts[i] = collect_some(source, w, budgets[i], calls_per_pid, mine);
  };
  std::vector<std::future<void>> others;
  for (unsigned i = 1; i < threads; ++i) others.push_back(std::async(std::launch::async, part, i));
  part(0);
  for (auto& f : others) f.get();
  size_t spent = 0;
  bool full = false;
  for (const Budget& b : budgets) {
    spent += max_bytes - b.bytes;
    full = full || b.full;
  }
  if (full || spent > max_bytes) {
    parts.clear();
    Budget budget{max_bytes};
    return collect_some(source, w, budget, calls_per_pid, every);
  }
  std::map<uint32_t, Proc> procs;
  for (auto& p : parts) procs.merge(p);
  return procs;
}

}  // namespace ingero::engine::steps_detail
