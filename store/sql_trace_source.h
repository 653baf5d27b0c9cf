// engine::TraceSource over a trace file: ours or the original implementation's, through the
// contract views the reader installs. Events come through store::EventCursor.
//
// A read that fails part-way (a damaged file) stops that read and is kept in error(): the
// answer computed from it is incomplete, so callers must check error() before reporting it.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/trace_source.h"
#include "store/call_cache.h"
#include "store/event_rows.h"
#include "store/trace_reader.h"

namespace ingero::store {

// Slices 0 .. n-1 of a window, taken by two readers from both ends until they meet: each
// slice once, whichever reader gets there first, even where one takes them all.
class SliceQueue {
 public:
  void reset(size_t n);
  // The next slice from the start (`first`) or from the end; nullopt once none is left.
  std::optional<size_t> take(bool first);

 private:
  std::mutex m_;
  size_t lo_ = 0, end_ = 0;  // slices lo_ .. end_ - 1 are left
};

class SqlTraceSource final : public engine::TraceSource {
 public:
  explicit SqlTraceSource(TraceReader& reader) : reader_(reader) {
    cache_.set_limit(default_call_cache_bytes());
  }
  ~SqlTraceSource() override;
  // A source on a second connection to the file. Its first error is also this source's when
  // it is destroyed (destroy it on this source's thread, after its last read).
  std::unique_ptr<engine::TraceSource> open_another() override;
  // True once the window's calls are in the cache: reading them then touches neither the
  // connection nor anything another read changes.
  bool concurrent_call_reads(const engine::Window& w) override { return cache_covers(w); }
  // When a read split between two connections has every part in memory, before this thread
  // has passed the second connection's parts on.
  void when_calls_held(const engine::Window& w, HeldFn fn) override {
    held_for_ = w;
    on_held_ = std::move(fn);
  }
  void calls(const engine::Window& w, const engine::EventFn& fn) override;
  // Through the calls' rows (EventFilter::rows), not the call cache, checked against the
  // file's counts as calls() is.
  void stored_calls(const engine::Window& w, const engine::EventFn& fn) override;
  void call_runs(const engine::Window& w, const engine::EventFn& fn,
                 const engine::CallRunFn& run) override;
  void host_events(const engine::Window& w, const engine::EventFn& fn) override;
  void host_context_events(const engine::Window& w, const engine::EventFn& fn) override;
  std::vector<engine::SnapshotRow> snapshots(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessActivity> process_activity(const engine::Window& w) override;
  std::map<uint32_t, engine::ProcessInfo> processes() override { return processes_of({}); }
  std::map<uint32_t, engine::ProcessInfo> processes_of(
      const std::optional<std::string>& node) override;
  std::pair<int64_t, int64_t> time_span() override;
  // A file of several nodes (merged): one pass over its events and runs gives every node's
  // span, kept while the file is unchanged.
  std::pair<int64_t, int64_t> node_span(const std::string& node) override;
  uint64_t event_count(const engine::Window& w) override;
  std::map<uint64_t, engine::CgroupInfo> cgroups() override;
  std::vector<engine::DeviceCounterSample> device_error_samples(const engine::Window& w) override;
  // store/device_tables.cc
  void device_samples(const engine::Window& w,
                      const std::function<void(const hal::DeviceSample&)>& fn) override;
  std::vector<hal::DeviceEvent> device_events(const engine::Window& w) override;
  bool has_stacks() override;
  std::vector<engine::StackFrameInfo> stack(uint64_t stack_id) override;
  bool has_cpu_samples() override;
  void cpu_samples(const engine::Window& w, const engine::CpuSampleFn& fn) override;
  std::optional<engine::TraceLosses> losses() override;
  std::optional<engine::TraceLosses> node_losses(const std::string& node) override;
  std::vector<engine::KernelNameInfo> kernel_names(const std::optional<std::string>& node) override;
  std::optional<engine::KernelNaming> kernel_naming(
      const std::optional<std::string>& node) override;
  std::set<uint32_t> tracer_pids(const std::optional<std::string>& node) override;
  std::optional<hal::ErrorCode> error_code(std::string_view api, int64_t ret) override {
    return reader_.error_code(api, ret);
  }
  int64_t recent_start(const engine::Window& w, uint64_t max_calls) override;
  std::vector<engine::InflightRow> inflight(const engine::Window& w) override;
  std::optional<std::vector<engine::CallSketch>> folded_call_sketches(
      const engine::Window& w) override;
  // Distinct node names in the trace (merged files hold several).
  std::vector<std::string> nodes() override;
  // The first error met while reading ("" when none): any answer computed after it is
  // incomplete.
  const std::string& error() const { return error_; }
  // The first read of calls is kept in memory (store/call_cache.h) for the later reads of
  // the same window or a part of it, up to `max_bytes` (0: never). A window whose calls do
  // not fit is read from the file every time. Default: default_call_cache_bytes().
  void set_call_cache(size_t max_bytes);
  // The default limit: hal::memory_share, at least kMinCallCacheBytes, at most
  // kMaxCallCacheBytes. A window that does not fit is read from the file by every pass: the
  // last 10 minutes of full rows of an hour of training (~31 M calls, ~1.1 GB) took explain
  // 457 s that way.
  static size_t default_call_cache_bytes();
  static constexpr size_t kMinCallCacheBytes = size_t(512) << 20;
  static constexpr size_t kMaxCallCacheBytes = size_t(4) << 30;
  // Calls held in memory now (0 when nothing is cached).
  size_t cached_calls() const {
    size_t n = cache_.calls();
    for (const CallCache& c : later_) n += c.calls();
    return cache_state_ == CacheState::kFull ? n : 0;
  }
  // The first read of a window estimated (from the per-second summaries) to hold at least
  // `min_items` rows and runs is cut in slices by time, read by this connection from the
  // first and by a second one, on another thread, from the last, until they meet; each fills
  // up to half the cache. 0: never cut. Default kSplitItems.
  void set_split_reads(uint64_t min_items) { split_items_ = min_items; }
  static constexpr uint64_t kSplitItems = 200000;
  // Where the last read that was to fill the cache was cut: its slices' starts (empty: it
  // was read in one).
  const std::vector<int64_t>& last_slices() const { return last_slices_; }
  // Called between the two snapshots of a split read, before the second begins (tests: a fold
  // committed there must not count a call twice).
  void set_between_snapshots(std::function<void()> fn) { between_snapshots_ = std::move(fn); }

 private:
  // What the sessions of `node` (every node: nullopt) lost, with their late libraries.
  std::optional<engine::TraceLosses> losses_of(const std::optional<std::string>& node);
  // " WHERE ts BETWEEN from AND to", and the window's pid and node where asked for.
  static std::string window_sql(const engine::Window& w, const char* ts, bool with_pid,
                                bool with_node = true);
  // Prepares `sql`; records the error and returns nullopt on failure.
  std::optional<Stmt> prepare(const std::string& sql);
  // Steps `st` once: true on a row; false at the end or on an error (recorded).
  bool row(Stmt& st);
  void fail(const ingero::Error& e);
  EventFilter filter(const engine::Window& w, bool with_pid) const;
  // host_events(), or with `for_context` host_context_events().
  void read_host_events(const engine::Window& w, const engine::EventFn& fn, bool for_context);
  bool cache_covers(const engine::Window& w) const;
  // Every call and run of the window in start order (runs: those with a call starting in it),
  // from the cache when it holds the window, else from the file (filling an empty cache).
  void read_calls(const engine::Window& w, const engine::EventFn& fn, const engine::CallRunFn& run);
  // Where the first read of `w` is cut into slices: their starts (the first is the window's),
  // at whole seconds, holding about equal numbers of rows and runs by the per-second summaries
  // (a call older than the folding counts as the share of an item folded calls took), 2 to 32
  // of them, of at least half split_items_ each; none for a window under split_items_ or a
  // file without summaries.
  std::vector<int64_t> slice_starts(const engine::Window& w);
  // What a fold or an append changes (schema version, last event and run ids, the folding
  // counters): two snapshots in the same state hold the same calls. nullopt if unreadable.
  std::optional<std::string> folding_state();
  // A source on a second connection whose read transaction is begun in `state`; nullptr when
  // the file changed under each of three tries, or it cannot be opened.
  std::unique_ptr<SqlTraceSource> open_matching(const std::string& state);
  // On a source from open_matching, in its snapshot: the rows of `w` and its runs starting at
  // or after `runs_from`, into `into`. Errors are recorded (fail()).
  enum class PartRead { kDone, kTooBig, kFailed };
  PartRead fill_part(const engine::Window& w, int64_t runs_from, CallCache& into);
  struct Fill;
  // A first read cut in slices: this connection takes them from the first, a second one
  // (in the same state) from the last, each the next one not taken, until they meet.
  struct Slices {
    std::unique_ptr<SqlTraceSource> other;
    engine::Window whole;
    std::vector<int64_t> starts;
    std::vector<PartRead> state;  // of the slices the other read
    SliceQueue queue;
    std::future<void> done;
    size_t limit = 0;  // the cache's, restored once read
    engine::Window window(size_t i) const;
    int64_t runs_from(size_t i) const;  // the runs of slice i start at or after it
  };
  // Starts the second connection on the slices of a window worth cutting; nullptr when it
  // is read in one.
  std::unique_ptr<Slices> start_slices(const engine::Window& w);
  // Reads this connection's slices into the pass, then the other's in order (from memory, or
  // here where they did not fit).
  ingero::Status read_slices(Slices& s, Fill& fill);
  // Where every part is in memory and when_calls_held() asked for this window: marks the
  // cache full and runs the callback. `mine`: the first slice this connection did not read.
  bool hold(Slices& s, size_t mine);
  // The cached calls and runs of `w`.
  void replay_cache(const engine::Window& w, const engine::EventFn& fn,
                    const engine::CallRunFn& run);
  // Whether any call of the window was folded into a run.
  bool has_folded_calls(const engine::Window& w);
  // Whether the window's calls may fit the cache: false when they all have rows and, at 8
  // bytes a call (less than any call takes there), the per-second summaries' count exceeds it.
  // Whether the window's calls may fit the cache; `calls`: how many the file says it holds (0:
  // not known, or folded calls whose count says nothing of the cache's bytes).
  bool may_fit_cache(const engine::Window& w, uint64_t& calls);
  // The nodes and the time span, kept while the file is unchanged (PRAGMA data_version: a
  // trace being written is read again after each commit).
  struct Extent {
    int64_t data_version = -1;
    std::vector<std::string> nodes;
    std::pair<int64_t, int64_t> span{0, 0};
  };
  SqlTraceSource(std::unique_ptr<TraceReader> own, SqlTraceSource* parent);
  const Extent& extent();
  // Schema 10 and later: the nodes and span from the blocks' entries (and schema 10's host
  // rows).
  Extent store_extent();
  // Whether `w` holds the whole of one of our files: its reads then scan the table and sort
  // what they keep rather than walk the time index, which looks each row up (a third faster).
  bool covers_file(const engine::Window& w);
  // An SQL condition on events' (source, op) matching on-CPU samples; "" when there are none.
  std::string cpu_sample_ops();
  // The on-CPU samples a direct read of host events (they are host events) brought along, with
  // the window read, for cpu_samples() to take instead of reading the table again.
  struct AheadSamples {
    engine::Window window;
    std::vector<engine::CpuSample> samples;
  };
  static constexpr size_t kMaxAheadSamples = 4u << 20;  // 96 MiB
  std::unique_ptr<TraceReader> own_reader_;             // set for a source made by open_another()
  SqlTraceSource* parent_ = nullptr;                    // the source it reports its error to
  TraceReader& reader_;
  StringPool strings_;
  std::optional<Extent> extent_;
  struct NodeSpans {
    int64_t data_version = -1;
    std::map<std::string, std::pair<int64_t, int64_t>> by_node;
  };
  std::optional<NodeSpans> node_spans_;
  // On a second connection, the first's span where it had read it, to choose plans by
  // (covers_file) without a pass of its own; a plan chosen on a span that has since grown
  // reads the same rows.
  std::optional<std::pair<int64_t, int64_t>> plan_span_;
  std::optional<AheadSamples> ahead_samples_;
  // Atomic: once the calls are held (when_calls_held), other threads ask cache_covers().
  enum class CacheState { kOff, kEmpty, kFull, kTooBig };
  std::atomic<CacheState> cache_state_ = CacheState::kEmpty;
  CallCache cache_;
  std::vector<CallCache> later_;  // the slices the second connection read, by index
  uint64_t expected_calls_ = 0;   // what the read filling the cache expects (may_fit_cache)
  std::atomic<bool> cache_abandoned_ = false;  // that read gave up: the other stops filling
  engine::Window cached_;
  engine::Window held_for_;
  HeldFn on_held_;
  bool held_ = false;  // during a first read, once hold() ran
  uint64_t split_items_ = kSplitItems;
  std::vector<int64_t> last_slices_;
  std::function<void()> between_snapshots_;
  std::string error_;
};

}  // namespace ingero::store
