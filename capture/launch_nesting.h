// Launches seen once, at one trap each (docs/architecture.md, "Launches cost one trap").
//
// A launch is emitted at its entry (bpf/calls.bpf.c: INGERO_RECIPE_ENTRY_ONLY), with the
// return address of its caller. A runtime launch (cudaLaunchKernel) then enters the driver's
// launch (cuLaunchKernel), whose probe emits a record of its own: this class folds it into the
// runtime launch it was made in, by its caller's address, which lies in the text of a library
// with launch probes. One launch is one event, as it was when a return probe paired them.
//
// Once every launch of a runtime library has been seen to nest a driver launch (kProofLaunches
// in a row, with the driver's call sites learnt), the runtime's launch probes add nothing but a
// trap: `on_proven` asks for them to be detached. From then on a driver launch made from that
// runtime's text is named as the runtime launch whose call site it is (its op, api and
// library), with the driver call counted as nested in it: the runtime's names are kept at one
// trap. A runtime launch the runtime refuses before it reaches the driver (an invalid
// configuration) is not seen after that: the tracer says so when it detaches.
//
// Not thread-safe: the pipeline's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hal/event.h"
#include "probe/proc_maps.h"
#include "probe/record_decoder.h"

namespace ingero::capture {

class LaunchNesting {
 public:
  // Launches of a runtime library in a row that nested a driver launch before its launch
  // probes are detached.
  static constexpr uint64_t kProofLaunches = 2000;

  struct Counters {
    uint64_t folded = 0;   // driver launches folded into the runtime launch they were made in
    uint64_t renamed = 0;  // driver launches named as the runtime launch whose probe went
    uint64_t held = 0;     // launches held for their nested call
    uint64_t proven = 0;   // runtime libraries whose launch probes were detached
    // Of `folded`: driver launches of processes whose maps were gone when their records were
    // read, folded into the runtime launch held for their thread, by order alone.
    uint64_t folded_by_order = 0;
    // Of `folded`: timed driver launches whose timing went to the untimed runtime launch they
    // were made in.
    uint64_t timed_by_driver = 0;
  };

  // `host` reads /proc/PID/maps; `table` names the probes records come from.
  LaunchNesting(const hal::HostView& host, const hal::ProbeTable& table)
      : host_(host), table_(table) {}

  // A decoded launch `ev` of probe `probe_id`: emitted now (it may have been renamed), held
  // (moved out of `ev`; emitted later through `out`) or folded into the launch it was made in.
  // `out` gets the events due now, in order: a launch held for its thread comes out before that
  // thread's next call.
  enum class Fate { kEmit, kHeld, kFolded };
  Fate on_launch(uint32_t probe_id, hal::Event& ev, std::vector<hal::Event>& out);
  // A record of another kind of thread `tid`: its held launch is due first.
  void before_call(uint32_t tid, std::vector<hal::Event>& out) {
    if (awaiting_) take_awaiting(tid);
    if (holding_) settle(tid, out);
  }
  // The end of a read cycle: releases the launches held since before the last one (a launch
  // read at a cycle's end may make its driver launch a few microseconds after: that record is
  // read in the next cycle, and counted in it), or, with `all` (the session's end), every one.
  void flush(std::vector<hal::Event>& out, bool all = false);
  // Process `pid` mapped or unmapped a library (its loader said so): its maps are read again
  // at the next launch whose caller they do not hold, however recently they were read.
  void process_mapped(uint32_t pid) {
    if (auto it = maps_.find(pid); it != maps_.end()) it->second.read_at_ns = 0;
  }

  // Called once per runtime library (its display path) when its launches are proven to nest.
  std::function<void(const std::string& library)> on_proven;
  // Whether proven runtimes' probes are detached (--keep-runtime-probes turns it off).
  bool detach = true;

  const Counters& counters() const { return counters_; }

 private:
  struct Runtime;
  struct Mapping {
    uint64_t start = 0, end = 0, offset = 0;
    uint64_t dev = 0, inode = 0;
    std::string path;
    // runtime_of's answer, while no runtime was added since (a launch asked it by path).
    mutable Runtime* runtime = nullptr;
    mutable uint64_t runtime_gen = 0;  // 0: not asked yet
  };
  struct Maps {
    std::vector<Mapping> exec;  // executable file mappings
    int64_t read_at_ns = 0;
  };
  // The executable mapping of `pid` that holds `addr` (re-reading the maps once on a miss; null
  // too when they cannot be read: the process exited before its records were read).
  const Mapping* mapping(uint32_t pid, uint64_t addr);
  // mapping()'s last answer, and its process (null when its maps were read again or dropped).
  const Mapping* last_ = nullptr;
  uint32_t last_pid_ = 0;
  // What is known of a library with launch probes, by display path.
  struct Runtime {
    uint64_t dev = 0, inode = 0;
    bool nests = false;     // a launch of it was seen nesting: its launches are held
    uint64_t in_a_row = 0;  // launches in a row that nested
    bool proven = false;
    // Driver call sites learnt: file offset of the caller in this library -> the runtime
    // launch probe whose call made it.
    std::unordered_map<uint64_t, uint32_t> sites;
    uint32_t any_probe = 0;  // a launch probe of this library, for sites not learnt
  };
  Runtime* runtime_of(const Mapping& m);
  uint64_t runtimes_gen_ = 1;  // grows as runtimes_ does
  // Folds driver launch `ev` (of probe `p`) into the runtime launch held for its thread, if one
  // of a higher layer waits for it, learning its call site `site` in `outer` (when known).
  bool fold_into_held(const hal::Event& ev, const hal::AttachedProbe& p, Runtime* outer,
                      uint64_t site);
  // Releases the launch held for `tid`. `known`: whether its thread's next record came (a
  // launch released at the end of a read cycle may still see its driver launch in the next
  // one, folded then; its runtime's run of nesting launches is not broken by it).
  void settle(uint32_t tid, std::vector<hal::Event>& out, bool known = true);
  // The probe of the thread's last record if it was a launch released at the end of a read
  // cycle before its driver launch was read, else null (and forgets it: this is the thread's
  // next record).
  const hal::AttachedProbe* take_awaiting(uint32_t tid);

  const hal::HostView& host_;
  const hal::ProbeTable& table_;
  // Kept after a process exits (its last records are read after it), up to kMaxProcesses.
  static constexpr size_t kMaxProcesses = 4096;
  std::unordered_map<uint32_t, Maps> maps_;
  std::map<std::string, Runtime> runtimes_;  // by display path of their probes
  // The runtime of a launch probe, by probe id (found by its library's path once).
  Runtime& runtime_of_probe(uint32_t probe_id, const hal::AttachedProbe& p);
  std::vector<Runtime*> probe_runtimes_;  // by probe id (ids are dense: hal::ProbeTable)
  // Launches held for the driver launch they may make: by thread, with their probe id. A
  // thread's slot stays when its launch is released (`active` false) and is used again by its
  // next launch: holding a launch allocates nothing. Inactive slots are dropped at a flush once
  // there are more than kMaxHeldSlots (threads come and go).
  struct Held {
    hal::Event ev;
    uint32_t probe = 0;
    Runtime* runtime = nullptr;  // its probe's library
    bool nested = false;
    bool active = false;
    bool awaiting = false;  // released unnested at a cycle's end; the thread sent nothing since
    uint64_t cycle = 0;     // the read cycle it was held in
  };
  static constexpr size_t kMaxHeldSlots = 1024;
  std::unordered_map<uint32_t, Held> held_;
  // The slot of `tid` in held_, or null: the last one found is kept (a thread's launches come
  // in runs), until held_ is cleared.
  Held* held_of(uint32_t tid);
  Held* last_held_ = nullptr;
  uint32_t last_held_tid_ = 0;
  size_t holding_ = 0;   // slots active
  size_t awaiting_ = 0;  // slots awaiting
  uint64_t cycle_ = 0;   // read cycles ended
  Counters counters_;
};

}  // namespace ingero::capture
