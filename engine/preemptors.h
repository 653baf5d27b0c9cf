// Who took the CPU of a process's threads, as the chains rank and name them, and the fixes
// that follow from who it was. Shared by the step rules' CPU contention and the host rule's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/analysis.h"

namespace ingero::engine {

// Preempted time by (pid, name), ranked: up to 3 other processes' tasks, longest first (those
// a user can move away), then the process `own`'s threads as one entry; `text` says the same:
// "noisy_neighbor (pid 579) 34%, its own threads (python3, pt_autograd_0) 66%".
std::vector<Preemptor> rank_preemptors(
    const std::map<std::pair<uint32_t, std::string>, uint64_t>& by, uint32_t own, std::string* text,
    uint64_t* total_ns = nullptr);

// One of them as a chain's sentence names it: "its own threads (python3, pt_autograd_0)" for
// process `own`'s, else as preemptor_label does (the tracer as the tracer).
std::string preemptor_name(const Analysis& a, const Preemptor& p, uint32_t own);

// What to do about `ranked` (rank_preemptors) taking the CPU of process `pid`'s threads: for
// its own threads, its worker processes (`workers`: the names of the processes it forked), and
// the largest other process, or the tracer where that is the one.
std::vector<std::string> preemptor_fixes(const Analysis& a, uint32_t pid,
                                         const std::vector<Preemptor>& ranked,
                                         const std::vector<std::string>& workers);

}  // namespace ingero::engine
