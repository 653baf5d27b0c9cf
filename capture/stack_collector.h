// Turns the stacks BPF captures into stored, symbolized, deduplicated stacks.
//
// For each process it keeps a snapshot of /proc/PID/maps, taken when the process is first
// seen, when it execs or changes its link map, and again when an address falls outside it,
// so a process that exits before its stack is resolved still resolves. Native frames become
// (module, file offset) and are symbolized with libdwfl; Python frames (CPython 3.10-3.13) are
// read from the process's code objects while it lives and merged into the native stack where
// the interpreter's eval loop sits. A stack's id hashes its resolved frames, so one code
// path in many processes is stored once; call records name their stack by the hash BPF
// computed, which maps to that id per process.
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
#include "ingero_records.h"
#include "probe/proc_maps.h"
#include "probe/python.h"
#include "probe/symbolizer.h"

namespace ingero::hal {
class BpfSession;
}

namespace ingero::capture {

class StackCollector {
 public:
  struct Counters {
    uint64_t received = 0;        // stack records
    uint64_t stored = 0;          // distinct stacks written
    uint64_t unknown_refs = 0;    // calls naming a stack that never arrived (dropped record)
    uint64_t empty = 0;           // stack records without a readable frame (calls name none)
    uint64_t native_frames = 0;   // in received stacks
    uint64_t unresolved = 0;      // native frames with no symbol (module + offset kept)
    uint64_t python_frames = 0;   // Python frames merged
    uint64_t python_invalid = 0;  // Python frames dropped: their code object did not check out
    uint64_t python_gone = 0;     // Python frames lost: the process exited before they were read
    uint64_t python_missing = 0;  // stacks of Python processes without Python frames
    // Stacks whose Python walk stopped at INGERO_PY_MAX frames: their outer frames are not in it.
    uint64_t python_truncated = 0;
    // Python frames without a line: their line table was longer than BPF copies, and the process
    // had exited before the rest could be read.
    uint64_t python_no_line = 0;
    uint64_t python_processes = 0;
    uint64_t python_refused = 0;  // interpreters whose layout did not check out
    uint64_t live = 0;            // stacks read from stuck threads (live_stack)
    uint64_t maps_rereads = 0;    // maps read again for an address outside them
  };
  // A live process's maps are read again for an address outside them; once that found the
  // address outside them still (garbage, not a library loaded since), not again for this long:
  // a frame-pointer chain through code built without them (libtorch, cuDNN) yields garbage in
  // most stacks, and reading the maps of a CUDA process (thousands of mappings) costs ~2 ms.
  static constexpr int64_t kMapsRereadNs = 100'000'000;

  // New stacks go to `out`. `session` may be null (tests): Python processes are then resolved
  // but not configured.
  StackCollector(hal::EventSink& out, hal::BpfSession* session, std::string proc_root = "/proc");
  ~StackCollector();

  // A process appeared, exec'd or changed its mappings: snapshot its maps and, for CPython,
  // tell BPF where its frames are. `maps`: its mappings as just read by the caller (library
  // discovery); empty: read here.
  void process_changed(uint32_t pid, std::vector<hal::MapEntry> maps = {});
  // First record from a pid: the same, unless already known.
  void process_seen(uint32_t pid);
  void process_exited(uint32_t pid);
  // Forgets the processes that are gone and never had a stack, but those `keep` names (traced
  // ones, whose exit comes with their last records): every exec of the host is shown here on a
  // host-wide trace, and only a traced process's exit is (process_exited).
  void forget_gone(const std::function<bool(uint32_t)>& keep = nullptr);
  size_t processes() const { return procs_.size(); }
  // Modules whose symbols are open now.
  size_t open_modules() const { return symbolizer_.modules(); }
  // Processes already running when tracing starts: set up the Python ones.
  void scan_existing(const std::vector<int>& pids);

  void on_stack(const ingero_stack_rec& rec);
  // The stack of a thread that is stuck, read from its memory now, stored like a captured one
  // (capture/live_stack.cc): the return address `caller` of the traced call it is inside and
  // the frame-pointer chain from `fp`, the caller's frame pointer at entry (the caller's
  // frames stay intact until the call returns); then the thread's Python frames as they are
  // now (`py_tstate`: its thread state as BPF cached it, 0 unknown). caller 0: Python frames
  // only (a thread outside any traced call). The stored stack's id; 0 when nothing was read.
  uint64_t live_stack(uint32_t pid, uint32_t tid, uint64_t caller, uint64_t fp, uint64_t py_tstate);
  void on_py_code(const ingero_py_code_rec& rec);
  // The stored stack of a call record's stack_hash; 0 when it has none or is unknown (counted
  // in unknown_refs).
  uint64_t stack_id(uint32_t pid, uint64_t hash);
  // Whether that stack arrived already (no counting).
  bool knows(uint32_t pid, uint64_t hash) const;

  const Counters& counters() const { return counters_; }
  // Forgets every process, stored stack and open module, keeping the counters: once the last
  // stack of a session is stored, the memory they hold (a few MiB) goes back before the
  // session's analysis. What comes after is resolved from scratch (a stack stored before is
  // offered to the sink again, which keeps one row of it).
  void release();
  // The snapshot of a process's maps, as last taken (empty when it has none).
  std::vector<hal::MapEntry> maps_of(uint32_t pid) const {
    auto it = procs_.find(pid);
    return it == procs_.end() ? std::vector<hal::MapEntry>{} : it->second.maps;
  }
  // Warnings worth a line on stderr (a Python build whose layout does not check out).
  std::function<void(const std::string&)> on_warning;

 private:
  struct Process {
    std::vector<hal::MapEntry> maps;            // sorted by start
    int64_t useless_reread_ns = INT64_MIN / 2;  // when a re-read left its address outside
    std::optional<hal::PythonProcess> python;
    bool rechecked = false;  // an unverified interpreter was inspected again
    bool refused = false;    // its layout did not check out: native frames only
    bool gone = false;       // exited: its maps read empty (a zombie), what was read stands
    std::unordered_map<uint64_t, uint64_t> ids;  // BPF hash -> stored stack id
  };
  Process& process(uint32_t pid);
  bool snapshot(uint32_t pid, Process& p, std::vector<hal::MapEntry> maps = {});
  const hal::MapEntry* find(const Process& p, uint64_t ip) const;
  void setup_python(uint32_t pid, Process& p);
  // on_stack's steps (capture/stack_collector.cc).
  std::vector<hal::StackFrame> native_frames(const ingero_stack_rec& rec, Process& p);
  std::vector<std::vector<hal::StackFrame>> python_groups(const ingero_stack_rec& rec, Process& p);
  static std::vector<hal::StackFrame> merge(std::vector<hal::StackFrame> native,
                                            std::vector<std::vector<hal::StackFrame>> groups);
  static uint64_t stack_identity(const std::vector<hal::StackFrame>& frames);

  hal::EventSink& out_;
  hal::BpfSession* session_;
  std::string proc_root_;
  hal::Symbolizer symbolizer_;
  std::unordered_map<uint32_t, Process> procs_;
  // The last stack found by (pid, hash): a loop's calls carry their site's stack again and
  // again, two look-ups each. Forgotten when a process's ids change or it goes.
  struct Found {
    uint32_t pid = 0;
    uint64_t hash = 0, id = 0;
  };
  mutable Found last_;
  std::unordered_set<uint64_t> stored_;
  std::unordered_set<std::string> warned_;
  // Modules (by module key) whose path on this host was found to be the very file mapped: not
  // looked up again at each process that maps them (every exec, on a host-wide trace).
  std::unordered_set<std::string> same_on_host_;
  static constexpr size_t kMaxSameOnHost = 16384;
  Counters counters_;
};

}  // namespace ingero::capture
