// When the kernel-name look-ups a library repeats before each of its launches rest, and when
// they come back (docs/architecture.md, "Kernel look-ups at rest").
//
// cuDNN looks a kernel up by name (cuLibraryGetKernel) and its function in the current context
// (cuKernelGetFunction) before each of its launches: 125-131 look-ups a step of ResNet-18 on an
// H200, three traps a launch beside the launch's own one. Their repeats name nothing new, and
// BPF already holds them back (records_call.h, INGERO_NAME_ONCE), but each still traps. A
// look-up probe that has named nothing new in its last `proof` calls held back rests: its
// probe is detached. A launch of a function with no name (a kernel first looked up while its
// look-ups rested) wakes every resting look-up; cuDNN's next look-up of that kernel names it,
// and the launches before take that name (calls.kernel is joined by function). Each wake doubles
// the proof the woken probes need to rest again, so a program that keeps bringing new kernels
// keeps its look-ups attached.
//
// A look-up made once per kernel (cuModuleGetFunction after a module's load, as Triton does)
// never holds back that many repeats, and stays attached. Not thread-safe: the tracer's loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ingero::capture {

class LookupRest {
 public:
  // Repeats held back since a probe last named something before it first rests.
  static constexpr uint64_t kFirstProof = 2000;
  static constexpr uint64_t kMaxProof = uint64_t(1) << 30;

  // A look-up probe now: its calls held back in BPF (they named nothing new), and its records
  // that named something (news), both counted since the session began.
  struct Seen {
    uint32_t probe = 0;
    uint64_t held_back = 0;
    uint64_t news = 0;
  };

  // The probes among `seen` (those attached now) that rest from now on.
  std::vector<uint32_t> to_rest(const std::vector<Seen>& seen);
  // `unnamed`: the functions launched without a name so far (a count that only grows). True when
  // the resting probes are to come back: a function was first launched unnamed since they rested.
  bool to_wake(uint64_t unnamed);
  // What was carried out: `probes` rested (with the unnamed count then), or the resting came back.
  void rested(const std::vector<uint32_t>& probes, uint64_t unnamed);
  // `doubling`: the woken probes need twice the proof to rest again (a kernel came unnamed);
  // not for a wake that foresaw one (a process newly mapping their library).
  void woke(bool doubling = true);

  bool resting() const { return resting_ > 0; }
  // The repeats a probe needs to rest (kFirstProof until its first wake).
  uint64_t proof(uint32_t probe) const;
  uint64_t rests() const { return rests_; }  // probes put to rest, each time counted
  uint64_t wakes() const { return wakes_; }

 private:
  // A probe's counts since the session began: held back from its first call on, unless it
  // named something, from the first sample after its last news (when the repeats after that
  // news came is not known).
  struct Probe {
    uint64_t base = 0;  // held_back at the sample after its last news (or its return)
    uint64_t news = 0;
    uint64_t proof = kFirstProof;
    bool resting = false;
    bool rebase = false;  // back from rest: its next sample is its new base
  };
  std::unordered_map<uint32_t, Probe> probes_;
  size_t resting_ = 0;
  uint64_t unnamed_at_rest_ = 0;
  uint64_t rests_ = 0, wakes_ = 0;
};

}  // namespace ingero::capture
