// A trace as a pprof profile (`ingero export --format pprof`): what continuous profilers
// (Pyroscope, Parca, Polar Signals, Google Cloud Profiler) and `go tool pprof` read.
//
// Sample types, in this order (Profile.sample_type):
//   cpu       nanoseconds  on-CPU samples, each worth its session's sampling period
//                          (1e9 / --cpu-sample-hz), by the stack that ran
//   gpu_wait  nanoseconds  time inside calls that block the thread until the device is done:
//                          kind sync, and device-to-host copies (explain's step model counts
//                          both as waiting for the GPU), by the stack that waited
//   launches  count        calls of kind launch and graph_launch, by the stack that launched
//                          (folded runs count every call they hold)
//   gpu_api   nanoseconds  time inside every traced GPU API call, as the trace records it
//                          (a launch seen at entry only carries its estimated duration)
// A call's sample is its stored stack with the call itself (its op, in a mapping of the probed
// library: the event's, or the one library the trace attached for its api) as the leaf; a call
// without a stack has the op alone. Stored stacks are already merged (Python
// frames where the interpreter's eval loop ran: docs/stacks.md), so explain's frames are the
// profile's. Python frames: function, file and line, no mapping. Native frames: a mapping per
// (file, build id), the address at the frame's file offset inside it, and function and
// file:line where they were resolved. Labels: pid and tid (numbers), comm, and node for a
// trace of several nodes.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/call_run.h"
#include "engine/trace_source.h"
#include "hal/event.h"

namespace ingero::serve::pprof {

// A stored frame with what a profile's mapping needs (the `stacks` view's columns).
struct Frame {
  bool python = false;
  std::string function, file;
  int64_t line = 0;
  std::string module;  // native: the mapped file
  std::optional<uint64_t> module_offset;
  std::string build_id;
};
// The frames of a stored stack, innermost first; empty when unknown.
using StackFn = std::function<std::vector<Frame>(uint64_t stack_id)>;

enum SampleType { kCpu = 0, kGpuWait = 1, kLaunches = 2, kGpuApi = 3, kSampleTypes = 4 };
// Which calls count as waiting for the GPU (gpu_wait).
bool waits_for_gpu(const hal::Event& e);
bool is_launch(hal::EventKind k);

struct Totals {
  std::array<int64_t, kSampleTypes> values{};  // by SampleType
  uint64_t calls = 0, cpu_samples = 0, samples = 0;
};

// The probed libraries, for the leaf frames' mappings.
struct Libraries {
  std::map<std::string, std::string> build_ids;  // path -> build id
  // api -> (path, build id) where the trace attached exactly one file for that api: the
  // library of a call whose event does not name it (stored calls are read without it).
  std::map<std::string, std::pair<std::string, std::string>> by_api;
};

class ProfileBuilder {
 public:
  ProfileBuilder(StackFn stacks, Libraries libraries);
  void add_call(const hal::Event& e, const std::string& node);
  void add_run(const engine::CallRun& r, const std::string& node);
  // One on-CPU sample worth `period_ns`.
  void add_cpu_sample(const engine::CpuSample& s, uint64_t period_ns, std::string_view comm,
                      const std::string& node);
  // Profile.time_nanos/duration_nanos (the window read), period_type cpu/nanoseconds and its
  // period (the first session's sampling period), and whether samples carry a node label.
  void set_window(int64_t start_ns, int64_t end_ns) {
    start_ns_ = start_ns;
    end_ns_ = end_ns;
  }
  void set_period(uint64_t ns) { period_ns_ = ns; }
  void set_node_label(bool on) { node_label_ = on; }
  void add_comment(std::string text) { comments_.push_back(std::move(text)); }
  // The perftools.profiles.Profile message, not compressed.
  std::string serialize() const;
  Totals totals() const {
    Totals t = totals_;
    t.samples = samples_.size();
    return t;
  }

 private:
  using Values = std::array<int64_t, kSampleTypes>;
  struct Key {
    std::vector<uint64_t> locations;  // leaf first
    uint32_t pid, tid;
    std::string comm, node;
    bool operator<(const Key& o) const {
      return std::tie(locations, pid, tid, comm, node) <
             std::tie(o.locations, o.pid, o.tid, o.comm, o.node);
    }
  };
  struct MappingRow {
    std::string file, build_id;
    bool functions = false, filenames = false, lines = false;
    uint64_t outermost = 0;  // stacks whose outermost native frame is in it
  };
  struct LocationRow {
    uint64_t mapping = 0, address = 0;
    uint64_t function = 0;  // 0: no line
    int64_t line = 0;
  };
  void add(std::vector<uint64_t> locations, uint32_t pid, uint32_t tid, std::string_view comm,
           const std::string& node, const Values& v);
  const std::vector<uint64_t>& stack_locations(uint64_t stack_id);
  uint64_t op_location(std::string_view op, std::string_view library, std::string_view api);
  uint64_t frame_location(const Frame& f);
  uint64_t mapping(const std::string& file, const std::string& build_id);
  uint64_t function(const std::string& name, const std::string& file);

  StackFn stacks_;
  Libraries libraries_;
  std::map<uint64_t, std::vector<uint64_t>> stack_cache_;
  std::map<std::tuple<bool, std::string, std::string, int64_t, std::string, std::string, int64_t>,
           uint64_t>
      frame_ids_;
  std::map<std::pair<std::string, std::string>, uint64_t> op_ids_, mapping_ids_, function_ids_;
  std::vector<MappingRow> mappings_;  // id i + 1
  std::vector<LocationRow> locations_;
  std::vector<std::pair<std::string, std::string>> functions_;  // name, file
  std::map<Key, Values> samples_;
  Totals totals_;
  int64_t start_ns_ = 0, end_ns_ = 0;
  uint64_t period_ns_ = 0;
  bool node_label_ = false;
  std::vector<std::string> comments_;
};

// One window per node to read (a single-node trace: one window), what each session's CPU
// sampling period was (by the sample's time and node), and the names of processes.
struct Reading {
  std::vector<std::pair<std::string, engine::Window>> windows;  // node ("" for one), window
  std::function<uint64_t(const std::string& node, int64_t ts_ns)> cpu_period_ns;
};
// Reads every call, run and on-CPU sample of the windows from `source` into `out`. Read
// errors stay in the source (its error()): the caller checks them.
void read_profile(engine::TraceSource& source, const Reading& reading, ProfileBuilder& out);

}  // namespace ingero::serve::pprof
