// Discovery -> ELF lookup -> probe plan -> attach, and the status of every library seen.
//
// A library that is absent is not an error. A file that cannot be parsed, a symbol that
// cannot be resolved, or an attach the kernel refuses becomes a LibraryStatus that `check`
// and `trace` report; it never stops the tracer. Each file is handled once per identity, so
// re-scans after exec/dlopen only cost a /proc read and a stat per mapped file.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "hal/backend.h"
#include "probe/bpf_session.h"
#include "probe/launch_windows.h"
#include "probe/library_discovery.h"
#include "probe/link_closer.h"
#include "probe/probe_plan.h"
#include "probe/record_decoder.h"

namespace ingero::hal {

struct LibraryStatus {
  std::string backend;
  std::string vendor, api;
  std::string path;  // display path
  std::string soname, version, build_id;
  std::set<std::string> sources;
  std::set<int> pids;
  bool embedded = false;  // static copy inside a host object
  bool stub = false;      // a link-time stub (…/stubs/…), not a working driver
  size_t specs_total = 0, specs_resolved = 0;
  size_t probes_planned = 0, probes_attached = 0;
  std::vector<std::string> missing_required, missing_optional;
  std::vector<std::string> errors;  // parse or attach failures, one line each
};

// Version from a library's file name or soname: "libamdhip64.so.5.2.21153" -> "5.2.21153".
std::string library_version(std::string_view real_name, std::string_view soname);

class ProbeManager {
 public:
  // session may be null: plan and report only (used by `check`).
  ProbeManager(BpfSession* session, std::vector<const VendorBackend*> backends,
               const HostView& host);

  // Scans every discovery source; returns the statuses of files handled for the first time.
  // `only`: the processes whose maps are read (LibraryDiscovery::scan_all).
  std::vector<LibraryStatus> scan_all(const std::vector<int>* only = nullptr);
  // Re-scans one process (exec, dlopen); returns statuses of newly handled files. `maps`: the
  // process's mappings as read (LibraryDiscovery::scan_process).
  std::vector<LibraryStatus> scan_pid(int pid, std::vector<MapEntry>* maps = nullptr);
  // Handles one file directly, e.g. the program a command will exec (static runtimes).
  std::vector<LibraryStatus> scan_file(const std::string& path, bool main_executable);
  // Attaches link-map notification probes to dynamic loaders seen so far.
  void watch_loaders();
  // Detaches every probe; the table stays, so records already in the rings still decode.
  // The links close together (close_links), after any detach_launches still closing. From
  // kHandOffPerfLinks perf-event uprobes on, a process of its own frees them after they are
  // detached here (hand_off_perf_events), and this returns at once: it says which.
  HandOff detach();
  // Detaches the launch probes of one library file (its display path), keeping its others,
  // which are in links of their own and stay attached. Returns how many probes went: from now
  // on no launch enters through them. Their links close on another thread (detach() waits for
  // it), which then calls `gone` with that count.
  Result<size_t> detach_launches(const std::string& path, std::function<void(size_t)> gone = {});

  // Kernel-name look-ups (a recipe with INGERO_NAME_ONCE: cuKernelGetFunction, cuFuncGetName,
  // hipModuleGetFunction, ...), which cuDNN repeats before each of its launches, are attached in
  // links of their own, one set a file. rest_lookups() detaches some, as detach_launches does a
  // runtime's launch probes: the file's others are attached again in new links first, then the
  // old links close on another thread, which then calls `gone`. wake_lookups() attaches every
  // file's look-ups again under the same ids, once those closes are done. Each returns how many
  // probes went or came back (0: none to move); a file whose look-ups cannot be moved keeps
  // them attached (rest_lookups says so on stderr; wake_lookups fails).
  // rest_lookups() rests the look-up probes among `probe_ids`. The look-up probes of every file:
  // their ids, with whether each rests now.
  size_t rest_lookups(const std::vector<uint32_t>& probe_ids,
                      std::function<void(size_t)> gone = {});
  Result<size_t> wake_lookups();
  std::vector<std::pair<uint32_t, bool>> lookup_probes() const;
  // Whether a process was seen mapping a file with look-up probes it had not mapped before
  // (a scan since the last call): its look-ups may come before its first launch, once each.
  bool take_lookup_newcomer() { return std::exchange(lookup_newcomer_, false); }

  // Plans only the specs `want` accepts (probe/probe_plan.h), from the next file handled on.
  void set_spec_filter(SpecFilter want) { want_ = std::move(want); }

  // Without uprobe sessions, launches are timed in windows (probe/launch_windows.h): their
  // return probes are attached in each file's windows alone. The plan's default comes from
  // the session's --launch-timing; INGERO_LAUNCH_WINDOW_MS sets the window for tests.
  const WindowPlan& window_plan() const { return windows_; }
  // A launch of probe `probe_id` was read (the first of that probe): its file's first window
  // closes a window's length later.
  void launch_seen(uint32_t probe_id, int64_t now_ns);
  // Opens and closes the windows due at `now_ns` (CLOCK_MONOTONIC), from the reading thread,
  // which never waits for the kernel here: an opening attaches the return probes on the
  // closer's thread (a perf-event uprobe's attach waits while the kernel frees others: ~120 ms
  // each, 30 s after another session's end) and takes effect at the tick after; a closing
  // hands them to that thread.
  void tick_launch_windows(int64_t now_ns);
  // Windows opened so far, all files together (tests, the trace summary).
  uint64_t windows_opened() const { return windows_opened_; }

  const ProbeTable& table() const { return table_; }
  const std::vector<LibraryStatus>& libraries() const { return libraries_; }
  size_t attached_probes() const { return attached_; }
  size_t loaders_watched() const { return loader_links_.size(); }
  // Why the last loader's link-map probe was refused ("" when none was).
  const std::string& loader_error() const { return loader_error_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<LibraryStatus> handle(std::vector<DiscoveredFile> files);
  // Attaches a file's probes, its launch probes and its look-ups each in links of their own
  // (detach_launches, rest_lookups), and records them in `st` and attached_files_.
  void attach_file(const DiscoveredFile& f, const std::vector<ResolvedProbe>& probes,
                   LibraryStatus& st);

  BpfSession* session_;
  std::vector<const VendorBackend*> backends_;
  const HostView& host_;
  LibraryDiscovery discovery_;
  SymbolCache symbols_;
  ProbeTable table_;
  SpecFilter want_;
  std::unordered_set<FileIdentity, FileIdentityHash> handled_;
  std::unordered_set<FileIdentity, FileIdentityHash> loaders_handled_;
  // Each file attached: its path, call sites and links; its launch probes apart.
  struct AttachedFile {
    std::string path, display_path;
    std::vector<CallSite> sites;
    std::vector<Link> links;
    std::vector<CallSite> launch_sites;
    std::vector<Link> launch_links;
    // Its kernel-name look-ups, in links of their own (rest_lookups), which hold those that do
    // not rest.
    std::vector<CallSite> lookup_sites;
    std::vector<bool> lookup_resting;  // by lookup_sites
    std::vector<Link> lookup_links;
    std::vector<Link> launch_returns;  // in a timing window only (without sessions)
    // A closed window's, until close_returns_at: a launch in flight as it closed still returns.
    std::vector<Link> closing_returns;
    int64_t close_returns_at = 0;
    WindowState window;
    bool opening = false;  // its window's return probes are being attached (open_later)
  };
  LibraryStatus* status_of(const std::string& display_path);
  bool open_window(AttachedFile& a);
  void open_later(size_t file);
  // Takes the windows open_later opened: their files' state, or their links to close.
  void take_opened(int64_t now_ns);
  struct Opened {
    size_t file = 0;
    uint16_t window = 0;
    Result<std::vector<Link>> links = std::vector<Link>{};
  };
  void close_window(AttachedFile& a, int64_t now_ns);
  std::vector<uint32_t> launch_ids(const AttachedFile& a) const;
  std::vector<AttachedFile> attached_files_;
  std::vector<Link> loader_links_;
  std::vector<LibraryStatus> libraries_;
  std::vector<std::string> errors_;
  std::string loader_error_;
  size_t attached_ = 0;
  WindowPlan windows_;  // period 0: launches are timed as any call (sessions, --launch-timing 1)
  uint64_t windows_opened_ = 0;
  // Files with look-up probes, and the processes seen mapping one (take_lookup_newcomer).
  std::unordered_set<FileIdentity, FileIdentityHash> lookup_files_;
  std::set<int> lookup_pids_;
  bool lookup_newcomer_ = false;
  std::mutex opened_mu_;
  std::vector<Opened> opened_;  // by open_later's jobs, for the reading thread
  LinkCloser closer_;           // last: its thread finishes before the rest goes
};

}  // namespace ingero::hal
