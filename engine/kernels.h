// Which kernels each process launches: how many of each in the window and per steady step, and
// the line that launches them. Names come from the trace (TraceSource::kernel_names: what the
// tracer learned from registrations, driver look-ups and ELF symbols); a launch whose function
// has none is counted as unnamed, never guessed. Launches folded into runs by tiered retention
// kept no function and are counted apart. A kernel's line comes from its own launches first
// (see ProcessKernels::site_moves).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/steps.h"
#include "engine/trace_source.h"

namespace ingero::engine {

struct KernelCount {
  std::string name;       // short display name: "scale<float>"; "" when unnamed
  std::string full_name;  // demangled: "void scale<float>(float*, float, int)"
  std::string source;     // registration, driver_lookup, elf_symbol; "" when unnamed
  uint64_t func = 0;      // its function (the first seen, when several share the name)
  uint64_t launches = 0;  // in the window
  // In whole steady steps (ProcessKernels::whole_steps): launches, how many steps had one, and
  // per step the median and the most.
  uint64_t steady_launches = 0, steps_with = 0, per_step_median = 0, per_step_max = 0;
  uint64_t stack = 0;  // its most frequent launch stack (0: none)
  std::string where;   // that stack's line in the user's code: "tiny_step (faults2.py:8)"
  // "scale<float>", or "function 0x55d0c0a01e45" when unnamed.
  std::string label() const;
};

struct ProcessKernels {
  uint32_t pid = 0;
  std::vector<KernelCount> kernels;  // most launches first
  uint64_t launches = 0;             // launches with a function, in the window
  uint64_t unnamed_launches = 0;     // of them, of a function without a name
  uint64_t unnamed_functions = 0;
  uint64_t folded_launches = 0;  // in runs of tiered retention: their functions were not kept
  size_t steady_steps = 0;       // of the process's step model
  // Of the steady steps, those that no such run overlaps: the per-step figures are theirs (a
  // step whose launches were partly folded would count its kernels short: 28 × `mul` per step
  // where 400 were made). All of them in a trace without folded launches.
  size_t whole_steps = 0;
  // Per step of the process's StepSeries::steps: whether such a run overlaps it (its kernels
  // in per_step count short). Empty when none does.
  std::vector<bool> partial_steps;
  bool partial(size_t step) const { return step < partial_steps.size() && partial_steps[step]; }
  // Per step of the process's StepSeries::steps: (index into `kernels`, launches) of the
  // kernels launched in it, for at most kMaxStepKernels kernels (the most launched).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> per_step;
  static constexpr size_t kMaxStepKernels = 12;
  // A folded run keeps its first call's stack alone, and the step model counts the run's
  // launches at that stack's line. Of a run of several kernels in a steady step, each kernel's
  // launches go instead to the lines its own launches were seen at (its launches that kept
  // their rows and its runs of that kernel alone), in their proportions: `calls` launches from
  // `from` to `to` (`to_stack`, on thread `tid`). Where a kernel was never seen on its own, its
  // launches stay at the run's line.
  struct SiteMove {
    std::string from, to;
    uint64_t to_stack = 0, calls = 0;
    uint32_t tid = 0;
  };
  std::vector<SiteMove> site_moves;
};

struct KernelReport {
  bool named = false;  // the trace has kernel names (or counted launches it could not name)
  std::optional<KernelNaming> naming;  // as the tracer counted it
  std::vector<ProcessKernels> processes;
  const ProcessKernels* find(uint32_t pid) const {
    for (const auto& p : processes)
      if (p.pid == pid) return &p;
    return nullptr;
  }
};

// One pass over the launches of `w`, assigned to `steps`' steps. Nothing is read, and `named`
// is false, when the trace has no kernel names and its tracer counted no unnamed launch (a
// trace from before kernel names). Reads of stacks hold `stacks_lock` when given.
KernelReport compute_kernels(TraceSource& source, const Window& w, const StepModel& steps,
                             std::mutex* stacks_lock = nullptr);

// Moves the launch sites' counts of each process's step summary as `k`'s site_moves say, and
// picks its top launch site again (StepSummary::launch_sites).
void apply_kernel_sites(StepModel& steps, const KernelReport& k);

// "400 × `mul` and 400 × `add` per step from tiny_step (faults2.py:8)": the process's most
// launched kernels per steady step (up to `top`, those with at least 10% of its launches), each
// with its line; "" when it launched none with a name in steady steps.
std::string kernels_per_step_text(const ProcessKernels& p, size_t top = 3);
// Which steady steps the per-step figures come from, where not every one: "the 12 of 50 steady
// steps that kept every kernel", or "not known: every steady step has folded launches"; "" when
// each kept every kernel. One wording for explain, get_kernels and the report's page.
std::string whole_steps_text(const ProcessKernels& p);
// A launched function without a kernel name: "function 0x55d0c0a01e45".
std::string unnamed_function_label(uint64_t func);
// "12 launches (of 2 functions) have no kernel name: ..." for the report; "" when every launch
// was named.
std::string unnamed_kernels_line(const KernelReport& k);
// Why `functions` launched functions have no name: registered before the trace began in a file
// without symbols, or first launched while the tracer's kernel look-ups rested (as many as it
// counted, KernelNaming::at_rest), or both.
std::string unnamed_cause(const KernelReport& k, uint64_t functions);

}  // namespace ingero::engine
