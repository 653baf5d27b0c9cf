// The calls of one analysis window, kept in memory between the engine's passes.
//
// `explain` reads the calls of its window about a dozen times (statistics, quantiles, steps,
// each rule, stack attribution). From SQLite each read costs ~1 µs per row, so a trace file is
// read once into a compact varint-encoded buffer (~13-60 bytes per call, against ~450 for a
// decoded hal::Event) and the other passes decode from memory (~40 ns per call).
//
// The buffer holds what EventCursor sets on a call and nothing else: times, ids, names,
// result, off-CPU counters, comm and peer comm, stack id and the decoded fields.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/call_run.h"
#include "hal/event.h"
#include "store/event_rows.h"

namespace ingero::store {

class CallCache {
 public:
  CallCache() = default;
  CallCache(const CallCache&) = delete;  // enc_ points into enc_threads_
  CallCache& operator=(const CallCache&) = delete;
  CallCache(CallCache&&) = default;  // a map's nodes move with it
  CallCache& operator=(CallCache&&) = default;
  // Appends one call, or one run of folded calls (engine/call_run.h), in start-time order.
  // Returns false, and keeps nothing more, once the buffer would exceed `max_bytes`, or at the
  // first call of a thread past kMaxThreads: each reader keeps ~300 bytes of state a thread.
  static constexpr size_t kMaxThreads = size_t(1) << 16;
  // Encoded calls in chunks of kChunkBytes: no reallocation copies, no doubling overshoot.
  // Each is 2 MiB-aligned in huge pages (hal/memory.h): filling it takes 2 page faults, not
  // 1,024.
  static constexpr size_t kChunkBytes = size_t(4) << 20;
  bool add(const hal::Event& e);
  bool add_run(const engine::CallRun& r);
  // Every kept call and run, in the order added: fn(const hal::Event&) for a call, decoded
  // into a reused Event; run(const engine::CallRun&) for a run.
  template <class Fn, class RunFn>
  void for_each(Fn&& fn, RunFn&& run) const {
    hal::Event e;
    engine::CallRun r;
    Decoder at;
    for (const auto& chunk : chunks_) {
      const uint8_t* p = chunk.data.get();
      const uint8_t* end = p + chunk.size;
      while (p < end) {
        if (*p & kRunFlag) {
          p = decode_run(p, at, r);
          run(static_cast<const engine::CallRun&>(r));
        } else {
          p = decode(p, at, e);
          fn(static_cast<const hal::Event&>(e));
        }
      }
    }
  }
  // Points the kept names (vendor, api, op) at `strings`' copies: a cache filled on another
  // thread from that thread's pool, then read where events point into `strings`.
  void intern_names(StringPool& strings);
  size_t bytes() const;
  // The encoded items' bytes, without the chunks' room left and the tables.
  size_t encoded_bytes() const;
  // Calls held, a run's calls included; and by process.
  size_t calls() const { return calls_; }
  const std::map<uint32_t, uint64_t>& calls_per_pid() const { return per_pid_; }
  void set_limit(size_t max_bytes) { max_bytes_ = max_bytes; }
  size_t limit() const { return max_bytes_; }
  // The calls the reader expects to add (0: unknown). Past its first chunk, a cache whose bytes
  // a call so far, times those calls, would exceed the limit by a quarter refuses the next
  // chunk: it gives up at a few MB, not at its limit, where it could not have held them all.
  void set_expected(uint64_t calls) { expected_ = calls; }
  // Refuses the next chunk once *stop is true (another reader of the same window gave up).
  void set_stop(const std::atomic<bool>* stop) { stop_ = stop; }
  void clear();

 private:
  struct Names {
    std::string_view vendor, api, op;
    hal::EventKind kind;
  };
  // An item's first byte: a run, not a call; the thread is the previous item's (its index not
  // written); the call's field mask is its thread's previous call's (not written); a comm not
  // its thread's previous item's follows; a second byte of rare flags follows.
  static constexpr uint8_t kRunFlag = 32, kSameThread = 64, kSameMask = 128, kNewComm = 8,
                           kRare = 4;
  uint32_t name_index(std::string_view vendor, std::string_view api, std::string_view op,
                      hal::EventKind kind);
  uint32_t comm_index(std::string_view comm);
  uint32_t stack_index(uint64_t stack);
  uint32_t funcs_index(std::string_view funcs);
  // What an item is encoded against, the encoder's and each decoder's own copy: the previous
  // item's start and thread, and per thread its comm and its previous call's field mask and
  // fields. Two ranks' loops interleave in time, each a thread's calls with the same fields on
  // one stream and a few kernels: against the previous item whatever its thread, a launch took
  // ~17 bytes (trace_gen's), of which 4.5 went to switching thread, comm and fields back and
  // forth.
  struct Thread {
    uint32_t comm = 0;
    uint64_t present = 0;
    std::array<uint64_t, hal::kFieldCount> fields{};
  };
  struct Decoder {
    uint64_t ts = 0;
    uint32_t thread = 0;
    std::vector<std::pair<uint32_t, uint32_t>> who;  // by thread index: pid, tid
    std::vector<Thread> threads;
  };
  // What a call and a run begin with: flags, the start (a delta from the previous item's), a
  // duration (the call's, or the run's span), who, what, and the stack.
  struct Head {
    uint8_t flags = 0;
    uint64_t ts = 0, length = 0;
    uint32_t pid = 0, tid = 0, name = 0, comm = 0, stack = 0;
  };
  // Whether a call of (pid, tid) may be added: a thread seen already, or room for one more.
  bool room_for(uint32_t pid, uint32_t tid) const {
    uint64_t who = uint64_t(pid) << 32 | tid;
    return (enc_ && who == enc_who_) || enc_threads_.size() < kMaxThreads ||
           enc_threads_.count(who);
  }
  void put_head(Head h);  // starts one_
  const uint8_t* get_head(const uint8_t* p, Decoder& at, Head& h) const;
  const uint8_t* decode(const uint8_t* p, Decoder& at, hal::Event& e) const;
  const uint8_t* decode_run(const uint8_t* p, Decoder& at, engine::CallRun& r) const;
  bool append();  // one_ into the chunks

  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  struct Chunk {
    std::unique_ptr<uint8_t[], Free> data;
    size_t size = 0;
  };
  std::vector<Chunk> chunks_;
  // The item being encoded: a fixed buffer, no capacity test per byte. The longest item is a
  // call with every field: its head (a flag byte, two 64-bit and six 32-bit varints), its
  // rare flags, result, peer comm, off-CPU counters, cgroup, field mask and fields.
  struct Item {
    using value_type = uint8_t;
    static constexpr size_t kMax =
        1 + 2 * 10 + 6 * 5 + 1 + 10 + 5 + 3 * 10 + 10 + 10 + hal::kFieldCount * 10;
    std::array<uint8_t, kMax> bytes;
    size_t n = 0;
    void push_back(uint8_t b) { bytes[n++] = b; }
    size_t size() const { return n; }
    const uint8_t* data() const { return bytes.data(); }
    void clear() { n = 0; }
  };
  Item one_;
  size_t max_bytes_ = SIZE_MAX;
  uint64_t expected_ = 0;
  const std::atomic<bool>* stop_ = nullptr;
  size_t calls_ = 0;
  // The encoder's: the previous item's start and thread, each thread's state and call count.
  uint64_t enc_ts_ = 0;
  uint64_t enc_who_ = UINT64_MAX;  // pid << 32 | tid of enc_
  struct EncThread {
    uint32_t index;
    Thread state;
    uint64_t* calls;  // per_pid_'s count of its pid
  };
  std::unordered_map<uint64_t, EncThread> enc_threads_;
  EncThread* enc_ = nullptr;
  std::map<uint32_t, uint64_t> per_pid_;
  std::vector<Names> names_;
  std::unordered_map<const char*, std::vector<uint32_t>> name_ids_;  // op address -> indexes
  uint32_t last_name_ = UINT32_MAX;                                  // the last name_index() answer
  std::vector<std::string> comms_;
  std::unordered_map<std::string, uint32_t> comm_ids_;
  // Runs' kernel counts (CallRun::funcs): views of the reading source's strings, as the names.
  std::vector<std::string_view> funcs_;
  std::unordered_map<std::string_view, uint32_t> func_ids_;
  uint32_t last_comm_ = 0;  // the last comm_index() answer
  std::vector<uint64_t> stacks_;
  std::unordered_map<uint64_t, uint32_t> stack_ids_;
};

}  // namespace ingero::store
