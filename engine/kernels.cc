#include "engine/kernels.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "engine/chain.h"
#include "hal/kernel_names.h"

namespace ingero::engine {

std::string unnamed_function_label(uint64_t func) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "function 0x%llx", static_cast<unsigned long long>(func));
  return buf;
}

std::string KernelCount::label() const {
  return name.empty() ? unnamed_function_label(func) : name;
}

namespace {

struct Name {
  std::string full, source;
};

struct Slot {
  KernelCount k;
  std::vector<uint32_t> per_step;  // sized to the process's steps on its first launch in one
  // Its launches by stack: those seen with their own stack (kept rows, runs of this kernel
  // alone), and those of runs of several kernels, at the run's first stack (which may be
  // another kernel's).
  std::unordered_map<uint64_t, uint64_t> stacks, run_stacks;
};

// One process's launches as they are read.
struct Acc {
  const StepSeries* series = nullptr;
  std::vector<int64_t> starts;  // of its steps
  std::unordered_map<uint64_t, uint32_t> slot_of_func;
  std::unordered_map<std::string, uint32_t> slot_of_name;
  std::vector<Slot> slots;
  std::vector<bool> partial;  // per step: a run that kept no function overlaps it
  // Launches of runs of several kernels that start in a steady step, by (the run's first
  // stack, slot): how many, and the run's thread. The step model counted them at that stack.
  std::map<std::pair<uint64_t, uint32_t>, std::pair<uint64_t, uint32_t>> shared;
  ProcessKernels out;
};

constexpr size_t kMaxStacksPerKernel = 64;
constexpr size_t kLocatedKernels = 32;  // kernels whose launch line is looked up

uint64_t median(std::vector<uint64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The stack seen with the most launches (the lowest id of a tie); 0 when none.
uint64_t top_stack(const std::unordered_map<uint64_t, uint64_t>& stacks) {
  uint64_t best = 0, top = 0;
  for (const auto& [stack, n] : stacks)
    if (n > best || (n == best && stack < top)) {
      best = n;
      top = stack;
    }
  return top;
}

// ProcessKernels::site_moves: each kernel's launches of runs of several kernels shared out over
// the stacks its own launches were seen at, in their proportions (largest remainders), where
// that stack's line is another than the run's.
void move_shared_launches(Acc& a, CodeLocations& line) {
  std::map<std::tuple<std::string, std::string, uint64_t>, ProcessKernels::SiteMove> moves;
  for (const auto& [key, value] : a.shared) {
    const auto& [run_stack, slot] = key;
    const auto& [launches, tid] = value;
    const auto& own = a.slots[slot].stacks;
    if (own.empty()) continue;
    std::vector<std::pair<uint64_t, uint64_t>> seen(own.begin(), own.end());
    std::sort(seen.begin(), seen.end());
    unsigned __int128 total = 0;
    for (const auto& [stack, n] : seen) total += n;
    std::vector<std::pair<uint64_t, unsigned __int128>> share;  // (launches, remainder)
    uint64_t given = 0;
    for (const auto& [stack, n] : seen) {
      unsigned __int128 x = static_cast<unsigned __int128>(launches) * n;
      share.push_back({uint64_t(x / total), x % total});
      given += share.back().first;
    }
    std::vector<size_t> by_rest(seen.size());
    for (size_t i = 0; i < by_rest.size(); ++i) by_rest[i] = i;
    std::stable_sort(by_rest.begin(), by_rest.end(),
                     [&](size_t x, size_t y) { return share[x].second > share[y].second; });
    for (size_t i = 0; given < launches; ++i, ++given) ++share[by_rest[i % by_rest.size()]].first;
    const std::string& from = line(run_stack);
    for (size_t i = 0; i < seen.size(); ++i) {
      const std::string& to = line(seen[i].first);
      if (!share[i].first || to.empty() || to == from) continue;
      auto& m = moves[{from, to, seen[i].first}];
      m.from = from;
      m.to = to;
      m.to_stack = seen[i].first;
      m.tid = tid;
      m.calls += share[i].first;
    }
  }
  for (auto& [key, m] : moves) a.out.site_moves.push_back(std::move(m));
}

void finish(Acc& a, TraceSource& source, std::mutex* lock) {
  ProcessKernels& out = a.out;
  CodeLocations line(source, lock);
  move_shared_launches(a, line);
  const StepSeries* s = a.series;
  std::vector<size_t> steady;
  if (s)
    for (size_t i = 0; i < s->steps.size(); ++i)
      if (!s->steps[i].warmup) steady.push_back(i);
  out.steady_steps = steady.size();
  // The per-step figures are those of the steps that kept every launch's kernel.
  std::erase_if(steady, [&](size_t i) { return i < a.partial.size() && a.partial[i]; });
  out.whole_steps = steady.size();
  out.partial_steps = a.partial;
  std::vector<uint32_t> order(a.slots.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t x, uint32_t y) {
    const KernelCount &a1 = a.slots[x].k, &b1 = a.slots[y].k;
    if (a1.launches != b1.launches) return a1.launches > b1.launches;
    return a1.label() < b1.label();
  });
  std::vector<uint32_t> rank(a.slots.size());
  for (uint32_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
  if (s) out.per_step.assign(s->steps.size(), {});
  for (uint32_t r = 0; r < order.size(); ++r) {
    Slot& slot = a.slots[order[r]];
    KernelCount& k = slot.k;
    if (k.name.empty()) ++out.unnamed_functions;
    if (!slot.per_step.empty()) {
      std::vector<uint64_t> counts;
      counts.reserve(steady.size());
      for (size_t i : steady) {
        uint64_t n = slot.per_step[i];
        counts.push_back(n);
        k.steady_launches += n;
        k.steps_with += n > 0;
        k.per_step_max = std::max(k.per_step_max, n);
      }
      k.per_step_median = median(std::move(counts));
      if (r < ProcessKernels::kMaxStepKernels)
        for (size_t i = 0; i < slot.per_step.size(); ++i)
          if (slot.per_step[i]) out.per_step[i].push_back({r, slot.per_step[i]});
    }
    // Its line: where its own launches were seen; else the first stack of the runs of several
    // kernels it was launched in.
    k.stack = top_stack(slot.stacks.empty() ? slot.run_stacks : slot.stacks);
    if (k.stack && r < kLocatedKernels) k.where = line(k.stack);
    out.kernels.push_back(std::move(k));
  }
}

}  // namespace

namespace {

// The pass over the launches: each process's slots (one per kernel name, one per unnamed
// function), their counts per step and their stacks.
class KernelPass {
 public:
  KernelPass(std::vector<KernelNameInfo> names, const StepModel& steps) : steps_(steps) {
    for (auto& n : names) {
      name_of_[n.pid][n.func] = uint32_t(known_.size());
      known_.push_back({std::move(n.name), std::move(n.source)});
    }
  }

  void launch(const hal::Event& e) {
    if (e.kind != hal::EventKind::kLaunch) return;
    auto func = e.get(hal::Field::kFunc);
    if (!func) return;
    Acc& a = acc(e.pid);
    Slot& s = count(a, e.pid, *func, e.stack_id, 1, true);
    in_step(a, s, int64_t(e.ts_ns), 1);
  }

  // A run of launches of one kernel counts as its calls, each in the step its start falls in.
  // A run of several kernels counts each kernel's launches; in a step where the whole run lies
  // in it, else the steps it overlaps are left out of the per-step figures (which call launched
  // which kernel is not kept). A run that kept no kernel is counted apart.
  void run(const CallRun& r) {
    if (r.kind != hal::EventKind::kLaunch) return;
    Acc& a = acc(r.pid);
    if (r.func) {
      Slot& s = count(a, r.pid, *r.func, r.stack_id, r.calls, true);
      if (a.series && !a.starts.empty())
        r.for_each_span([&](uint64_t, int64_t start, uint64_t) { in_step(a, s, start, 1); });
      return;
    }
    const int64_t last = r.last_start();
    const size_t step = step_of(a, r.ts_ns);
    const bool one_step = step != SIZE_MAX && last < a.series->steps[step].end_ns;
    const bool steady = r.stack_id && steady_start(a, r.ts_ns);
    bool known = r.for_each_kernel([&](uint64_t func, uint64_t launches) {
      Slot& s = count(a, r.pid, func, r.stack_id, launches, false);
      if (one_step) add_in_step(a, s, step, launches);
      if (steady) {
        auto& x = a.shared[{r.stack_id, uint32_t(&s - a.slots.data())}];
        x.first += launches;
        x.second = r.tid;
      }
    });
    if (!known) a.out.folded_launches += r.calls;
    if (!known || !one_step) mark_partial(a, r.ts_ns, r.ts_ns + int64_t(r.span_ns));
  }

  std::vector<ProcessKernels> finish_all(TraceSource& source, std::mutex* lock) {
    std::vector<ProcessKernels> out;
    for (auto& [pid, a] : procs_) {
      finish(a, source, lock);
      out.push_back(std::move(a.out));
    }
    std::sort(out.begin(), out.end(),
              [](const ProcessKernels& x, const ProcessKernels& y) { return x.pid < y.pid; });
    return out;
  }

 private:
  // `own`: the launches were seen with `stack` as their own (not a run of several kernels').
  Slot& count(Acc& a, uint32_t pid, uint64_t func, uint64_t stack, uint64_t launches, bool own) {
    Slot& s = a.slots[slot_of(a, pid, func)];
    s.k.launches += launches;
    a.out.launches += launches;
    if (s.k.name.empty()) a.out.unnamed_launches += launches;
    auto& stacks = own ? s.stacks : s.run_stacks;
    if (stack) {
      auto it = stacks.find(stack);
      if (it != stacks.end())
        it->second += launches;
      else if (stacks.size() < kMaxStacksPerKernel)
        stacks.emplace(stack, launches);
    }
    return s;
  }

  // Whether a call starting at `ts` is in a steady step as the step model's launch sites count
  // it (engine/steps_summary.cc, count_launch_sites).
  static bool steady_start(const Acc& a, int64_t ts) {
    if (!a.series || a.starts.empty() || ts < a.starts.front() ||
        ts >= a.series->steps.back().end_ns)
      return false;
    auto it = std::upper_bound(a.starts.begin(), a.starts.end(), ts);
    return !a.series->steps[size_t(it - a.starts.begin()) - 1].warmup;
  }

  // Every step that [from, to] overlaps may hold launches whose kernels were not kept: a run's
  // calls are counted by their estimated starts, which reach its end at most. A step left out
  // in doubt leaves the per-step figures to the others; one kept would count short.
  void mark_partial(Acc& a, int64_t from, int64_t to) {
    if (!a.series || a.starts.empty()) return;
    auto it = std::upper_bound(a.starts.begin(), a.starts.end(), from);
    size_t i = it == a.starts.begin() ? 0 : size_t(it - a.starts.begin()) - 1;
    for (; i < a.starts.size() && a.starts[i] <= to; ++i) {
      if (a.series->steps[i].end_ns <= from) continue;
      if (a.partial.empty()) a.partial.assign(a.starts.size(), false);
      a.partial[i] = true;
    }
  }

  // The steady step a launch starting at `ts` falls in; SIZE_MAX when none.
  static size_t step_of(const Acc& a, int64_t ts) {
    if (!a.series || a.starts.empty()) return SIZE_MAX;
    auto it = std::upper_bound(a.starts.begin(), a.starts.end(), ts);
    if (it == a.starts.begin()) return SIZE_MAX;
    size_t i = size_t(it - a.starts.begin()) - 1;
    return ts < a.series->steps[i].end_ns ? i : SIZE_MAX;
  }
  void add_in_step(Acc& a, Slot& s, size_t i, uint64_t launches) {
    if (s.per_step.empty()) s.per_step.assign(a.starts.size(), 0);
    s.per_step[i] += uint32_t(launches);
  }
  void in_step(Acc& a, Slot& s, int64_t ts, uint64_t launches) {
    if (size_t i = step_of(a, ts); i != SIZE_MAX) add_in_step(a, s, i, launches);
  }

  Acc& acc(uint32_t pid) {
    if (last_ && last_pid_ == pid) return *last_;
    auto [it, fresh] = procs_.try_emplace(pid);
    if (fresh) {
      it->second.out.pid = pid;
      it->second.series = steps_.find(pid);
      if (it->second.series)
        for (const Step& st : it->second.series->steps) it->second.starts.push_back(st.start_ns);
    }
    last_pid_ = pid;
    last_ = &it->second;
    return it->second;
  }

  // The slot of a function: its name's (functions of one name share it), or its own.
  uint32_t slot_of(Acc& a, uint32_t pid, uint64_t func) {
    if (auto it = a.slot_of_func.find(func); it != a.slot_of_func.end()) return it->second;
    const Name* n = nullptr;
    if (auto p = name_of_.find(pid); p != name_of_.end())
      if (auto f = p->second.find(func); f != p->second.end()) n = &known_[f->second];
    uint32_t slot = uint32_t(a.slots.size());
    bool fresh = true;
    if (n) {
      auto [it, inserted] = a.slot_of_name.try_emplace(n->full, slot);
      slot = it->second;
      fresh = inserted;
    }
    if (fresh) {
      Slot s;
      s.k.func = func;
      if (n) {
        s.k.full_name = n->full;
        s.k.name = hal::short_kernel_name(n->full);
        s.k.source = n->source;
      }
      a.slots.push_back(std::move(s));
    }
    a.slot_of_func.emplace(func, slot);
    return slot;
  }

  const StepModel& steps_;
  std::vector<Name> known_;
  std::unordered_map<uint32_t, std::unordered_map<uint64_t, uint32_t>> name_of_;
  std::unordered_map<uint32_t, Acc> procs_;
  uint32_t last_pid_ = 0;
  Acc* last_ = nullptr;
};

}  // namespace

KernelReport compute_kernels(TraceSource& source, const Window& w, const StepModel& steps,
                             std::mutex* stacks_lock) {
  KernelReport r;
  r.naming = source.kernel_naming(w.node);
  std::vector<KernelNameInfo> names = source.kernel_names(w.node);
  r.named = !names.empty() || (r.naming && r.naming->unnamed_launches);
  if (!r.named) return r;
  KernelPass pass(std::move(names), steps);
  source.call_runs(
      w, [&](const hal::Event& e) { pass.launch(e); }, [&](const CallRun& run) { pass.run(run); });
  r.processes = pass.finish_all(source, stacks_lock);
  return r;
}

void apply_kernel_sites(StepModel& steps, const KernelReport& k) {
  for (const ProcessKernels& p : k.processes) {
    if (p.site_moves.empty()) continue;
    StepSeries* s = nullptr;
    for (auto& x : steps.processes)
      if (x.pid == p.pid) s = &x;
    if (!s) continue;
    auto& sites = s->summary.launch_sites;
    auto find = [&](const std::string& where) -> StepSummary::LaunchSite* {
      for (auto& x : sites)
        if (x.where == where) return &x;
      return nullptr;
    };
    for (const auto& m : p.site_moves) {
      if (auto* from = find(m.from)) from->calls -= std::min(from->calls, m.calls);
      StepSummary::LaunchSite* to = find(m.to);
      if (!to) {
        sites.push_back({m.to, 0, 0, 0, 0});
        to = &sites.back();
      }
      to->calls += m.calls;
      if (m.calls > to->stack_calls || (m.calls == to->stack_calls && m.to_stack < to->stack)) {
        to->stack_calls = m.calls;
        to->stack = m.to_stack;
        to->tid = m.tid;
      }
    }
    pick_launch_site(s->summary);
  }
}

std::string whole_steps_text(const ProcessKernels& p) {
  if (p.whole_steps >= p.steady_steps) return "";
  if (!p.whole_steps) return "not known: every steady step has folded launches";
  return "the " + format_count(p.whole_steps) + " of " + format_count(p.steady_steps) +
         " steady steps that kept every kernel";
}

std::string kernels_per_step_text(const ProcessKernels& p, size_t top) {
  uint64_t steady = 0;
  for (const auto& k : p.kernels) steady += k.steady_launches;
  if (!steady) return "";
  std::vector<const KernelCount*> shown;
  for (const auto& k : p.kernels)
    if (!k.name.empty() && k.per_step_median && 10 * k.steady_launches >= steady)
      shown.push_back(&k);
  std::stable_sort(shown.begin(), shown.end(), [](const KernelCount* a, const KernelCount* b) {
    return a->per_step_median > b->per_step_median;
  });
  if (shown.size() > top) shown.resize(top);
  if (shown.empty()) return "";
  bool one_place = !shown[0]->where.empty();
  for (const auto* k : shown) one_place = one_place && k->where == shown[0]->where;
  std::string out;
  for (size_t i = 0; i < shown.size(); ++i) {
    out += i == 0 ? "" : i + 1 == shown.size() ? " and " : ", ";
    out += format_count(shown[i]->per_step_median) + " \u00d7 `" + shown[i]->name + "`";
    if (!one_place && !shown[i]->where.empty()) out += " (from " + shown[i]->where + ")";
  }
  out += " per step";
  if (one_place) out += " from " + shown[0]->where;
  return out;
}

std::string unnamed_cause(const KernelReport& k, uint64_t functions) {
  const std::string before =
      "their kernels were registered before the trace began and the file has no symbol at them "
      "(trace the program from its start, or keep its symbols)";
  const std::string rest =
      "first launched while the tracer's kernel look-up probes rested, and their library did "
      "not look them up again (trace with --keep-lookup-probes)";
  uint64_t at_rest = k.naming ? std::min(k.naming->at_rest, functions) : 0;
  if (!at_rest) return before;
  if (at_rest == functions) return "they were " + rest;
  return before + "; " + format_count(at_rest) + " of those functions " +
         (at_rest == 1 ? "was " : "were ") + rest;
}

std::string unnamed_kernels_line(const KernelReport& k) {
  uint64_t launches = 0, functions = 0, folded = 0;
  for (const auto& p : k.processes) {
    launches += p.unnamed_launches;
    functions += p.unnamed_functions;
    folded += p.folded_launches;
  }
  // Launches folded into runs of several kernels are not counted by kernel here: then the
  // tracer's own count, made as it read every launch, is the one to give.
  if (folded && k.naming && k.naming->unnamed_launches > launches) {
    launches = k.naming->unnamed_launches;
    functions = std::max(functions, k.naming->unnamed_functions);
  }
  if (!launches) return "";
  return format_count(launches) + (launches == 1 ? " launch" : " launches") + " (of " +
         format_count(functions) + (functions == 1 ? " function" : " functions") +
         (launches == 1 ? ") has" : ") have") + " no kernel name: " + unnamed_cause(k, functions) +
         (k.naming && k.naming->unreadable
              ? "; " + format_count(k.naming->unreadable) +
                    " names a registration or look-up gave could not be read (the process "
                    "exited before the tracer read them)"
              : "");
}

}  // namespace ingero::engine
