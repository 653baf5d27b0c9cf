// Names the functions launches carry (hal/kernel_names.h), in user space and off the launch
// path. Two kinds of input arrive in ring order:
//   * name captures from the low-rate name sources (a module's registration, a driver look-up):
//     a key, and where its name is in the process or which other key's name it takes;
//   * launches: a (pid, func) that needs a name. One no source named is named by the ELF symbol
//     at its address (a stub registered before the trace began), looked up once per function.
// Each (pid, func) is handed to the sinks once, before the first launch that needs it. Names
// that cannot be found stay unnamed and are counted, never guessed.
//
// A name usually sits in a page of the program's file the process has never touched (the
// probe cannot read it there), so it is read from the file: the address's mapping in
// /proc/PID/maps gives the file and its offset. Anonymous memory, and writable mappings whose
// bytes may differ from the file's, are read through /proc/PID/mem. Maps are read when a process
// is first needed and again when an address falls outside them; a program that exited before
// its records were read resolves with the maps the stack collector kept of it (maps_fallback).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hal/event_sink.h"
#include "hal/kernel_names.h"
#include "hal/result.h"
#include "probe/proc_maps.h"
#include "probe/symbolizer.h"

namespace ingero::capture {

// What the namer reads of a process: the I/O seam (LocalProcessImage reads /proc; tests fake
// it).
class ProcessImage {
 public:
  virtual ~ProcessImage() = default;
  // The text of /proc/PID/maps; "" when the process is gone.
  virtual std::string maps(uint32_t pid) = 0;
  // Up to `len` bytes of the file `m` maps, at file offset `offset` (fewer at its end).
  virtual ingero::Result<std::string> read_file(uint32_t pid, const hal::MapEntry& m,
                                                uint64_t offset, size_t len) = 0;
  // Up to `len` bytes of the process's memory at `addr`.
  virtual ingero::Result<std::string> read_memory(uint32_t pid, uint64_t addr, size_t len) = 0;
  // The symbol covering file offset `offset` of the file `m` maps (function "" when none).
  virtual hal::NativeSymbol symbol_at(uint32_t pid, const hal::MapEntry& m, uint64_t offset) = 0;
};

// The real /proc: files through /proc/PID/root while the process lives (containers), else by
// their path; symbols with libdwfl (probe/symbolizer.h), without source lines.
class LocalProcessImage final : public ProcessImage {
 public:
  explicit LocalProcessImage(std::string proc_root = "/proc") : proc_(std::move(proc_root)) {}
  std::string maps(uint32_t pid) override;
  ingero::Result<std::string> read_file(uint32_t pid, const hal::MapEntry& m, uint64_t offset,
                                        size_t len) override;
  ingero::Result<std::string> read_memory(uint32_t pid, uint64_t addr, size_t len) override;
  hal::NativeSymbol symbol_at(uint32_t pid, const hal::MapEntry& m, uint64_t offset) override;

 private:
  std::string proc_;
  hal::Symbolizer symbolizer_;
};

class KernelNamer {
 public:
  struct Counters {
    uint64_t captures = 0;           // name-source records that named something
    uint64_t repeats = 0;            // ... of a function already named: nothing read
    uint64_t names = 0;              // (pid, func) handed to the sinks
    uint64_t by_source[4] = {};      // of those, by hal::KernelNameSource
    uint64_t unreadable = 0;         // captures whose name could not be read (process gone, ...)
    uint64_t named_launches = 0;     // launches whose function had a name when they were read
    uint64_t unnamed_launches = 0;   // launches whose function had none: NULL in calls.kernel
    uint64_t unnamed_functions = 0;  // distinct (pid, func) launched without a name
    // Functions first launched without a name, those named later included: only grows
    // (capture/lookup_rest.h wakes the kernel look-ups by it).
    uint64_t launched_unnamed = 0;
    // Of unnamed_functions: those first launched while the kernel look-ups rested (their
    // look-up may have gone unseen; set_lookups_resting).
    uint64_t unnamed_at_rest = 0;
    uint64_t dropped = 0;  // entries over kMaxEntries, not kept
    uint64_t unkept = 0;   // handles of a kernel whose name was past kMaxKeptBytes
  };
  // Longest name read; longer ones are unreadable (mangled names of deep templates reach a few
  // KiB).
  static constexpr size_t kMaxName = 64 * 1024;
  // (pid, func) entries kept at most, over every process.
  static constexpr size_t kMaxEntries = 1 << 20;
  // Bytes of distinct names kept for the aliases that may follow (a process that loads
  // libtorch_cuda registers tens of thousands of kernels; every such process shares them).
  static constexpr size_t kMaxKeptBytes = size_t(256) << 20;

  KernelNamer(hal::EventSink& out, std::unique_ptr<ProcessImage> image);

  // True when the capture named something or is kept for an alias (news); false for a repeat of
  // a function already named, or a name that could not be read.
  bool on_capture(const hal::NameCapture& c);
  // A launch of `func` by `pid` is about to go to the sinks.
  void on_launch(uint32_t pid, uint64_t func, uint64_t ts_ns) {
    Proc* p = last_pid_ == pid && last_ ? last_ : &proc(pid);
    auto it = p->funcs.find(func);
    if (it != p->funcs.end() && it->second.named) {
      ++counters_.named_launches;
      return;
    }
    launch_slow(*p, pid, func, ts_ns, it != p->funcs.end());
  }
  // The process exec'd at `ts_ns`: a new image, whose names and maps are its own (read when
  // next needed). What was named after the exec stays: the calls ring is read before the host
  // ring, so its first registrations may come before its exec record.
  void process_exec(uint32_t pid, uint64_t ts_ns);
  // `child` was forked from `parent` at `ts_ns`: a function it launches that its parent (or
  // theirs) had named takes that name, at its first launch; nothing is copied at the fork (a
  // DataLoader worker forked from a process of 20,000 kernels launches none). Forked children
  // launched unnamed what their parent had registered (import, then fork: legal in CUDA).
  void process_fork(uint32_t parent, uint32_t child, uint64_t ts_ns);
  // Its mappings changed (dlopen): read again when next needed.
  void process_mapped(uint32_t pid);
  void process_exited(uint32_t pid);
  const Counters& counters() const { return counters_; }
  // Whether the kernel look-up probes rest now (capture/lookup_rest.h): a function first
  // launched unnamed meanwhile is counted in unnamed_at_rest until it is named.
  void set_lookups_resting(bool resting) { lookups_resting_ = resting; }
  // Maps kept of a process elsewhere (the stack collector's snapshot, taken when its first
  // stack arrived): used when /proc/PID/maps reads empty (it exited before its records were
  // read). Null: none.
  std::function<std::vector<hal::MapEntry>(uint32_t pid)> maps_fallback;

 private:
  struct Func {
    bool named = false;
    bool elf_tried = false;  // its ELF symbol was looked up
    uint64_t since_ns = 0;   // the capture or launch that made the entry
    uint64_t unnamed = 0;    // launches read while it had no name
    bool at_rest = false;    // first launched unnamed while the look-ups rested
    // The name as the binary spells it, for aliases that arrive later: interned (every process
    // that loads a library registers the same names), null past kMaxKeptBytes.
    const std::string* raw = nullptr;
    hal::KernelNameSource source = hal::KernelNameSource::kNone;
    std::vector<uint64_t> waiting;  // keys aliased to this one before it had a name
  };
  struct Proc {
    std::vector<hal::MapEntry> maps;  // sorted by start
    bool maps_read = false, stale = false;
    std::unordered_map<uint64_t, Func> funcs;
  };
  Proc& proc(uint32_t pid);
  // The name an ancestor this process was forked from gave `func` (null: none).
  const Func* inherited(uint32_t pid, uint64_t func) const;
  void launch_slow(Proc& p, uint32_t pid, uint64_t func, uint64_t ts_ns, bool known);
  bool snapshot(uint32_t pid, Proc& p);
  const hal::MapEntry* mapping(uint32_t pid, Proc& p, uint64_t addr);
  std::optional<std::string> read_name(uint32_t pid, Proc& p, uint64_t addr);
  // The ELF symbol starting exactly at `addr`, when it is a function of a mapped file.
  bool elf_name(uint32_t pid, Proc& p, uint64_t addr, std::string& raw);
  Func* entry(Proc& p, uint64_t func, uint64_t ts_ns);
  const std::string* intern(const std::string& raw);
  void name(uint32_t pid, Proc& p, uint64_t func, const std::string& raw,
            hal::KernelNameSource source, uint64_t ts_ns, int depth = 0);

  hal::EventSink& out_;
  std::unique_ptr<ProcessImage> image_;
  std::unordered_map<uint32_t, Proc> procs_;
  std::unordered_map<uint32_t, uint32_t> parent_of_;  // a forked child's parent, until its exec
  uint32_t last_pid_ = 0;
  Proc* last_ = nullptr;
  size_t entries_ = 0;
  std::unordered_set<std::string> kept_;  // interned names (node-based: pointers stay valid)
  size_t kept_bytes_ = 0;
  Counters counters_;
  bool lookups_resting_ = false;
};

}  // namespace ingero::capture
