// Batched writer for trace files (schema 10).
//
// Calls go from the decoded event into an in-memory block of columns (store/call_block.h) and
// are written once: a block is written to call_store at each commit while it fills, and with
// its folded form once full (store/call_store.h). No call is inserted as a row and read back.
// Host events go the same way into blocks of host_store (store/host_block.h,
// store/host_store.h); calls and host events share one id space. Per-second
// summaries of the calls (store/call_summaries.h) go with the batch that follows their second.
//
// commit() makes everything added durable; the tracer commits on a timer and at shutdown, so
// SIGINT loses nothing that was decoded. The file is in WAL mode while written (readers may
// query it live); finish() checkpoints and switches it back to a self-contained
// rollback-journal file.
//
// A failed write (disk full, I/O error) rolls back the open batch, counts every event in it
// in failed(), and returns the error; committed data is never touched, and the calls in
// memory go back to what the file holds. Callers report it and may keep going (the next batch
// retries).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "engine/quantile_sketch.h"
#include "engine/trace_source.h"
#include "hal/device_sampler.h"
#include "hal/event.h"
#include "hal/event_sink.h"
#include "hal/result.h"
#include "hal/side_channel.h"
#include "hal/sink_records.h"
#include "store/block_queue.h"
#include "store/call_block.h"
#include "store/call_summaries.h"
#include "store/host_block.h"
#include "store/retention.h"
#include "store/sqlite_db.h"

namespace ingero::store {

struct SessionInfo {
  std::string node;
  std::string host, kernel, os_release, cpu_model;
  int cpu_cores = 0;
  int64_t mem_total_mib = 0;
  int64_t started_at_ns = 0;   // unix epoch
  int64_t mono_offset_ns = 0;  // CLOCK_REALTIME - CLOCK_MONOTONIC
  std::string pid_filter, flags, backends;
  uint32_t tracer_pid = 0;  // the tracer's own process (0: not recorded)
};

// What a session lost (hal/sink_records.h: the writer and the metrics registry both read it).
using SessionCounters = hal::SessionCounters;

struct SessionEnd {
  int64_t stopped_at_ns = 0;
  uint64_t attached_probes = 0;
  SessionCounters counters;
  std::string bpf_stats_json = "{}";
  std::string exit_reason;
};

struct LibraryRow {
  std::string backend, vendor, api, path, soname, version, build_id;
  bool embedded = false;
  uint64_t specs_total = 0, specs_resolved = 0, probes_attached = 0;
  std::string missing, errors;
  // Found while tracing, after process late_pid had mapped it: attached late_ns after its
  // loader reported it (0: how long unknown). 0, 0: attached before any process ran it.
  uint32_t late_pid = 0;
  int64_t late_ns = 0;
};

using SnapshotRow = hal::HostSnapshot;

struct ProcessStatsRow {
  int64_t ts_ns = 0, dur_ns = 0;  // interval (wall clock)
  uint32_t pid = 0;
  std::string comm;
  uint64_t cgroup_id = 0;
  uint64_t switches = 0, involuntary = 0, off_cpu_ns = 0, max_off_cpu_ns = 0, wakeups = 0;
  uint64_t page_allocs = 0, page_bytes = 0, forks = 0, block_ios = 0, block_bytes = 0, block_ns = 0;
};

// A cgroup and who it belongs to (kernelside/tenant_names.h). Unknown names are unset: stored
// as '' in the columns the original implementation defined NOT NULL (pod_name, namespace,
// container_id), NULL in the others (docs/schema.md).
struct CgroupRow {
  uint64_t cgroup_id = 0;
  std::string path, container_id;
  std::optional<std::string> pod, pod_namespace, container, pod_uid, qos, runtime, names_from;
};

// A causal chain as stored (engine output, serialized by the caller).
struct ChainRow {
  std::string id, severity, summary, root_cause, explanation;
  std::string recommendations_json = "[]", timeline_json = "[]", pids_json = "[]";
  std::string op, rule, vendor, api;
  int64_t detected_at_ns = 0, p99_us = 0, p50_us = 0, window_start_ns = 0, window_end_ns = 0;
  double tail_ratio = 0;
};

// The id a chain of `session` is stored under in `db`'s causal_chains, the table's key: `id`
// (NODE:RULE:...), or ID@SESSION where another session holds `id` (a later session of the file
// or another file merged in: the same process and op again), which replaced or dropped it.
ingero::Result<std::string> stored_chain_id(Db& db, const std::string& id, int64_t session);

// One counter of one device port, as a backend's poller read it (hal/side_channel.h).
struct DeviceCounterRow {
  int64_t ts_ns = 0;
  std::string backend, device, counter, unit;
  uint32_t port = 0;
  uint64_t value = 0, base_value = 0;
  bool is_error = false;
  std::vector<hal::DeviceAttribute> attributes;  // stored as a JSON object
};

// A trace session as `ingero merge` tells sessions apart: two files holding a session of the
// same node, start and host hold the same calls.
struct SessionIdentity {
  std::string node, host;
  int64_t started_at_ns = 0;
  auto operator<=>(const SessionIdentity&) const = default;
};

// The store's side of the capture seam: events, processes and stacks go into the open batch;
// commit() makes them durable.
class TraceWriter final : public hal::EventSink {
 public:
  // Creates the file, or opens one of this schema, with the backends' `views`
  // (store/contract_views.h). Refuses legacy, foreign, older- and newer-schema files (an older
  // one says how to convert it). Sets aside
  // 256 KiB next to it (PATH-reserve) for the final session update on a full disk.
  // `created`: the caller made `path` empty just before (TraceLock::create), so a failure
  // removes it as it removes a file this call created.
  static ingero::Result<std::unique_ptr<TraceWriter>> open(const std::string& path,
                                                           std::span<const hal::SqlView> views = {},
                                                           bool created = false);
  ~TraceWriter();

  ingero::Result<int64_t> begin_session(const SessionInfo& info);
  // Adds one event to the open batch. ts_ns is monotonic; the session offset converts it to
  // the wall clock stored.
  ingero::Status add(const hal::Event& ev);
  ingero::Status commit() override;
  // Commits, with the per-second summaries of every second before `before_ns`: those seconds
  // are complete even when no call came since (an idle trace; the tracer passes its wall clock
  // 2 s behind). commit() alone writes the seconds 2 s behind the newest call.
  ingero::Status summarise_before(int64_t before_ns);
  // Records a traced library file; events whose Event::library equals row.path link to it.
  ingero::Result<int64_t> add_library(const LibraryRow& row);
  ingero::Status note_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                              int64_t seen_at_ns);
  ingero::Status add_snapshot(const SnapshotRow& row);
  // `ingero merge`: the source sessions the current session holds (table merged_sessions).
  ingero::Status add_merged_sessions(const std::vector<SessionIdentity>& sources);
  // A cgroup's path only (its names, if stored, stay).
  ingero::Status add_cgroup_path(uint64_t cgroup_id, std::string_view path);
  // A cgroup's path and names, replacing what was stored for its id (store/cgroup_metadata.cc).
  ingero::Status add_cgroup(const CgroupRow& row);
  ingero::Status add_device_counter(const DeviceCounterRow& row);
  // The device side channel's samples and events (hal/device_sampler.h), one statement a batch;
  // an absent figure is stored NULL (store/trace_writer_device.cc).
  ingero::Status add_device_samples(const std::vector<hal::DeviceSample>& rows);
  ingero::Status add_device_events(const std::vector<hal::DeviceEvent>& rows);
  ingero::Status add_process_stats(const ProcessStatsRow& row);
  // Stores a stack under its id (no-op if that id is stored already).
  ingero::Status add_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames);
  // hal::EventSink
  ingero::Status on_event(const hal::Event& ev) override { return add(ev); }
  ingero::Status on_process(uint32_t pid, std::string_view name, std::string_view cmdline,
                            int64_t seen_at_ns) override {
    return note_process(pid, name, cmdline, seen_at_ns);
  }
  ingero::Status on_stack(uint64_t stack_id, const std::vector<hal::StackFrame>& frames) override {
    return add_stack(stack_id, frames);
  }
  // Threads stuck now (hal/inflight.h): a row for each new or changed one, replacing the
  // row of the same call or idle episode, and the final row of each that ended
  // (store/trace_writer_inflight.cc).
  ingero::Status on_inflight(const hal::InflightReport& report) override;
  ingero::Status add_inflight(const hal::Inflight& row);
  // A kernel's name for one process's function (store/kernel_names.h): the first name of a
  // (pid, func) stays; a different one later is counted in kernel_name_conflicts().
  ingero::Status add_kernel_name(const hal::KernelName& k);
  ingero::Status on_kernel_name(const hal::KernelName& k) override { return add_kernel_name(k); }
  // The sampled kinds of the seam, as rows (store/trace_writer_sink.cc): system_snapshots,
  // process_stats (a row per process), device_counters (a row per counter), the device
  // tables, and the sessions row's loss and naming counters.
  ingero::Status on_snapshot(const hal::HostSnapshot& s) override { return add_snapshot(s); }
  ingero::Status on_process_stats(int64_t ts_ns, int64_t dur_ns,
                                  const std::vector<hal::ProcessStats>& deltas) override;
  ingero::Status on_device_counters(int64_t ts_ns, std::string_view backend,
                                    const std::vector<hal::DevicePortSample>& ports) override;
  ingero::Status on_device_samples(const std::vector<hal::DeviceSample>& samples) override {
    return add_device_samples(samples);
  }
  ingero::Status on_device_events(const std::vector<hal::DeviceEvent>& events) override {
    return add_device_events(events);
  }
  ingero::Status on_session_counters(const SessionCounters& lost,
                                     const hal::KernelNaming* naming) override;
  // Records what the session could not name (the sessions row); conflicts add this writer's.
  ingero::Status update_kernel_naming(const engine::KernelNaming& n);
  uint64_t kernel_name_conflicts() const { return kernel_name_conflicts_; }
  // A stack in the original implementation's format (merged files keep them), by its hash;
  // creates its table on first use.
  ingero::Status add_legacy_stack(int64_t hash, std::string_view ips, std::string_view frames);
  // Replaces this session's chains (the live engine re-derives them as the trace grows).
  ingero::Status replace_chains(const std::vector<ChainRow>& chains);
  // Converts a monotonic timestamp with the session's offset.
  int64_t to_wall(uint64_t mono_ns) const { return int64_t(mono_ns) + mono_offset_ns_; }
  // Records the session's loss counters (and events stored, store errors) so far.
  ingero::Status update_counters(const SessionCounters& c);
  // Writes the current session's end (counters, stop time, reason) without finishing the file:
  // a writer that holds several sessions (merge) ends each before beginning the next.
  ingero::Status end_session(const SessionEnd& end);
  // Commits what is pending, then one bounded retention pass (store/retention.h); rows it
  // deleted add to retention_deleted(), those not yet shipped to retention_unshipped().
  ingero::Result<RetentionPass> apply_retention(const RetentionPolicy& p, int64_t now_ns,
                                                uint64_t budget = 20000);
  uint64_t retention_deleted() const { return retention_deleted_; }
  // Of them, this session's calls and host events (the rest: snapshots, counters, summaries).
  uint64_t retention_calls() const { return retention_calls_; }
  uint64_t retention_events() const { return retention_events_; }
  uint64_t retention_unshipped() const { return retention_unshipped_; }
  // Commits, then folds for good the blocks whose calls all ended before `before_ns` (wall
  // clock) and whose ids are up to `through_id` (the tracer's shipper: calls not yet in
  // ClickHouse keep their rows): their `full` form goes, their folded form stays. The calls
  // whose rows went.
  ingero::Result<uint64_t> fold_blocks(int64_t before_ns, int64_t through_id = INT64_MAX);
  // Commits, records the session's totals, checkpoints and leaves a self-contained file.
  ingero::Status finish(const SessionEnd& end);

  uint64_t written() const { return written_; }  // committed
  uint64_t failed() const { return failed_; }    // lost to write errors
  size_t pending() const { return pending_; }
  // The next id the writer gives (calls and host events share them).
  int64_t next_id() const { return next_id_; }
  // Calls per block (default kCallBlockRows): smaller blocks for tests of block boundaries.
  void set_block_rows(size_t n) { block_rows_ = std::max<size_t>(1, n); }
  // A block is closed (folded, and written for good by the next commit) before a call `ns` or
  // more after its first (default 0: only when full), so that calls lose their rows with
  // --full-rows within about that much, whatever the call rate.
  void set_block_span(int64_t ns) { block_span_ns_ = ns; }
  // Blocks go into the file at a commit once `ns` have passed since they last did (the tracer:
  // kBlockIntervalNs), or once kMaxWaitingRows events of full blocks wait, and always at
  // commit_all() and the session's end; the commits between write the rest (summaries,
  // dictionaries). Default 0: at every commit. A block still filling is rewritten whole each
  // time, and the file's log grows by it (docs/performance.md).
  void set_block_interval(int64_t ns) { block_interval_ns_ = ns; }
  static constexpr int64_t kBlockIntervalNs = 1'000'000'000;
  // The clock of that interval (tests): steady ns.
  void set_steady_clock(std::function<int64_t()> now) { steady_now_ = std::move(now); }
  // A commit that writes every block in memory: what was added is in the file.
  ingero::Status commit_all() { return commit_batch(false, INT64_MIN, true); }
  // Whether full blocks are folded (default off; the tracer turns it on): off, every block is its
  // own folded form and every call keeps its row for good (`trace --keep-all`; `compact` folds such
  // a file later).
  void set_folding(bool on) { folding_ = on; }
  // How long finish() waits for readers that hold the file (a report or an export of it still
  // reading) before it leaves the log beside the file; default 20 s.
  void set_end_wait_ms(int64_t ms) { end_wait_ms_ = ms; }
  int64_t end_wait_ms() const { return end_wait_ms_; }
  // finish() could not fold the log back into the file: FILE-wal holds part of the trace.
  bool left_in_wal() const { return left_in_wal_; }
  // Why, where it was not a reader: the checkpoint's error (a full disk); empty for a reader.
  const std::string& left_in_wal_why() const { return left_in_wal_why_; }
  int64_t session_id() const { return session_id_; }
  // The cgroups of the current session's events and of their peers (0 included), kept as they
  // are added so that naming them at session end reads no block back.
  const std::set<uint64_t>& session_cgroups() const { return session_cgroups_; }
  Db& db() { return *db_; }
  // Hands back what the writer keeps for events to come: its emptied blocks kept for reuse and
  // SQLite's page cache. For a session's end, after the last events and before its analysis:
  // the tracer's peak memory is then the larger of the two, not their sum.
  void release_memory();

 private:
  // Folds the whole log into the file, waiting up to end_wait_ms_ for readers: whether it did.
  bool checkpoint_whole();
  struct OpKey {
    const void* api;
    const void* op;
    bool operator==(const OpKey&) const = default;
  };
  struct OpKeyHash {
    size_t operator()(const OpKey& k) const {
      return std::hash<const void*>()(k.api) * 31 ^ std::hash<const void*>()(k.op);
    }
  };
  struct OpIds {
    int source = 0;
    int op = 0;
    bool launch = false;
  };

  TraceWriter(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  ingero::Status prepare();
  ingero::Result<OpIds> op_ids(const hal::Event& ev);
  ingero::Result<OpIds> op_ids(std::string_view vendor, std::string_view api, std::string_view op,
                               hal::EventKind kind);
  ingero::Result<int> source_id(std::string_view vendor, std::string_view api, hal::EventKind kind);
  ingero::Status begin_if_needed();
  // Writes the batch's blocks (`final`: the block filling is folded too, and then closed) and
  // the summaries of complete seconds (`final`: every second), and commits.
  // `blocks`: write the blocks whatever the interval.
  ingero::Status commit_batch(bool final, int64_t summarise_before = INT64_MIN,
                              bool blocks = false);
  int64_t library_id(std::string_view path);
  ingero::Status fail_batch(const ingero::Error& e);
  // Calls (store/trace_writer_calls.cc): the next id and block ids from the file; a call into
  // the filling block (a full one waits for the commit); the blocks of the batch written
  // (`final`: the filling one is folded too, at the session's end); the fold limit of a launch
  // op in a process. Host events (store/trace_writer_host.cc) go the same way, unfolded.
  ingero::Status load_ids();
  ingero::Status add_call(const hal::Event& ev, const OpIds& ids);
  ingero::Status write_blocks(bool final);
  ingero::Status write_block(const CallBlock& b, int64_t block_id, bool fold);
  std::optional<int64_t> fold_limit(uint32_t pid, int source, int op) const;
  void add_host(const hal::Event& ev, const OpIds& ids);
  ingero::Status write_host_blocks(bool final);

  std::unique_ptr<Db> db_;
  CallSummarizer summaries_;  // per-second call summaries not yet written
  // The blocks of calls and of host events in memory (ids: their rows in call_store and
  // host_store), and the next call or host event id.
  BlockQueue<CallBlock> calls_;
  BlockQueue<HostBlock> hosts_;
  int64_t next_id_ = 1;
  size_t block_rows_ = kCallBlockRows;
  // Events in full blocks that may wait for the next commit: past it, the writer commits at
  // once. At ~800,000 calls/s a 200 ms batch was ~40 blocks of columns in memory (~40 MB).
  static constexpr size_t kMaxWaitingRows = 4 * kCallBlockRows;
  int64_t block_span_ns_ = 0;
  int64_t block_interval_ns_ = 0;
  int64_t blocks_written_ns_ = INT64_MIN;  // steady clock; INT64_MIN: never
  std::function<int64_t()> steady_now_;
  bool folding_ = false;
  int64_t end_wait_ms_ = 20'000;
  bool left_in_wal_ = false;
  std::string left_in_wal_why_;
  FoldedCalls folded_;  // scratch of write_block, and its encoded forms
  std::string encoded_[3];
  // Each launch op's latency per (session, pid, source, op), timed calls only: the fold limit.
  std::map<std::tuple<int64_t, uint32_t, int, int>, engine::QuantileSketch> launch_latency_;
  std::set<std::pair<int, int>> launch_ops_;  // (source, op) of launch kind
  // PATH-reserve: space set aside at open and freed when the disk fills, so the session row can
  // still record the loss (store_errors) and the stop. Removed by finish() and the destructor.
  std::string reserve_path_;
  uint64_t retention_deleted_ = 0;
  uint64_t retention_unshipped_ = 0;
  uint64_t retention_calls_ = 0, retention_events_ = 0;  // this session's
  uint64_t written_before_session_ = 0;  // events_stored counts the current session's
  Stmt insert_op_, insert_source_, insert_proc_;
  Stmt insert_block_, insert_host_block_;
  std::string host_encoded_;  // scratch of write_host_blocks
  Stmt insert_inflight_, delete_inflight_;
  std::unordered_map<OpKey, OpIds, OpKeyHash> op_cache_;
  // The last two ops looked up (calls of one op come in runs, and a launch renamed after its
  // runtime names its driver launch too): found without the hash lookup.
  struct OpMemo {
    OpKey key{nullptr, nullptr};
    OpIds ids;
  };
  OpMemo op_memo_[2];
  unsigned op_memo_next_ = 0;                           // the slot the next miss fills
  std::unordered_map<std::string, OpIds> op_by_name_;   // "api\0op"
  std::unordered_map<std::string, int> source_by_api_;  // "vendor\0api"
  std::unordered_map<int, int> next_op_;
  std::unordered_map<std::string, int64_t> library_ids_;
  std::unordered_map<const void*, int64_t> library_by_ptr_;
  // The last library asked for (a launch loop's calls name one library again and again; a
  // hash lookup a call was 3% of the tracer's CPU on a launch loop).
  const void* last_library_ptr_ = nullptr;
  int64_t last_library_id_ = 0;
  int next_source_ = 0;
  int64_t session_id_ = 0;
  std::set<uint64_t> session_cgroups_;
  uint64_t last_cgroup_ = ~uint64_t{0};  // the last cgroup_id inserted into session_cgroups_
  int64_t mono_offset_ns_ = 0;
  std::string node_;
  bool in_txn_ = false;
  // The device rows' tables and inserts (store/trace_writer_device.cc), made with the first
  // device row and kept; forgotten after a failed insert (a rolled-back batch may have taken the
  // tables with it).
  bool device_tables_ = false;
  Stmt device_sample_insert_, device_event_insert_;
  ingero::Result<Stmt*> device_insert(Stmt& cached, const char* sql);
  void forget_device_inserts();
  size_t pending_ = 0;  // events added that the file lacks
  uint64_t written_ = 0;
  uint64_t failed_ = 0;
  uint64_t kernel_name_conflicts_ = 0;
};

}  // namespace ingero::store
