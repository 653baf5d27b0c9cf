// The pprof profile builder: sample types, merged Python and native frames, mappings with build
// ids, labels. The command (`ingero export --format pprof`) is pprof_export_test.cc.
#include "serve/export/pprof.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "compress/gzip.h"
#include "profile.pb.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"
#include "tests/unit/pprof_support.h"
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::pprof {
namespace {

using store::tiers_fixture::call;
using store::tiers_fixture::kMs;
using store::tiers_fixture::kUs;

const pp::Mapping& mapping_of(const pp::Profile& p, uint64_t id) {
  for (const auto& m : p.mapping())
    if (m.id() == id) return m;
  ADD_FAILURE() << "no mapping " << id;
  return p.mapping(0);
}

// A location as "function file:line [mapping file build-id +offset]".
std::string describe(const pp::Profile& p, uint64_t id) {
  const pp::Location& l = p.location(int(id - 1));
  EXPECT_EQ(l.id(), id);
  std::string s;
  for (const auto& line : l.line()) {
    const pp::Function& f = p.function(int(line.function_id() - 1));
    s += str(p, f.name());
    if (!str(p, f.filename()).empty())
      s += " " + str(p, f.filename()) + ":" + std::to_string(line.line());
  }
  if (l.mapping_id()) {
    const pp::Mapping& m = mapping_of(p, l.mapping_id());
    char off[32];
    std::snprintf(off, sizeof(off), "+0x%llx",
                  (unsigned long long)(l.address() - m.memory_start() + m.file_offset()));
    s += " [" + str(p, m.filename()) + " " + str(p, m.build_id()) + " " + off + "]";
  }
  return s;
}

std::vector<std::string> stack_of(const pp::Profile& p, const pp::Sample& s) {
  std::vector<std::string> out;
  for (uint64_t id : s.location_id()) out.push_back(describe(p, id));
  return out;
}

Frame native(std::string fn, std::string file, int64_t line, uint64_t off) {
  Frame f;
  f.module = "/opt/app/bin/trainer";
  f.module_offset = off;
  f.build_id = "b1d0";
  f.function = std::move(fn);
  f.file = std::move(file);
  f.line = line;
  return f;
}

Frame python(std::string fn, std::string file, int64_t line) {
  Frame f;
  f.python = true;
  f.function = std::move(fn);
  f.file = std::move(file);
  f.line = line;
  return f;
}

TEST(Pprof, SampleTypesFramesMappingsAndLabels) {
  std::map<uint64_t, std::vector<Frame>> stacks = {
      {0x10,
       {native("at::sync", "", 0, 0x1a2b), python("step", "/src/train.py", 41),
        python("main", "/src/train.py", 90)}},
      {0x20, {native("", "", 0, 0x2000)}}};  // unresolved: an address in its mapping
  int lookups = 0;
  ProfileBuilder b(
      [&](uint64_t id) {
        ++lookups;
        return stacks.count(id) ? stacks[id] : std::vector<Frame>{};
      },
      Libraries{{{"/usr/local/cuda/lib64/libcudart.so.13", "cafe01"}},
                {{"cuda_driver", {"/usr/lib/libcuda.so.1", "d41"}}}});
  auto ev = [](hal::EventKind k, const char* op, uint64_t dur, uint64_t stack) {
    hal::Event e = call(1000, dur, "cuda_runtime", op, k, 7, 8);
    e.library = "/usr/local/cuda/lib64/libcudart.so.13";
    e.stack_id = stack;
    return e;
  };
  using K = hal::EventKind;
  b.add_call(ev(K::kSync, "cudaStreamSynchronize", 3 * kMs, 0x10), "");
  b.add_call(ev(K::kSync, "cudaStreamSynchronize", 2 * kMs, 0x10), "");  // same stack: summed
  hal::Event d2h = ev(K::kMemcpy, "cudaMemcpy", 500 * kUs, 0x20);
  d2h.set(hal::Field::kDirection, uint64_t(hal::CopyDirection::kDeviceToHost));
  b.add_call(d2h, "");
  hal::Event h2d = ev(K::kMemcpy, "cudaMemcpy", 700 * kUs, 0x20);
  h2d.set(hal::Field::kDirection, uint64_t(hal::CopyDirection::kHostToDevice));
  b.add_call(h2d, "");                                             // not a wait
  b.add_call(ev(K::kLaunch, "cudaLaunchKernel", 5 * kUs, 0), "");  // no stack: the op alone
  // An event that does not name its library: the one the trace attached for its api.
  hal::Event driver = call(1000, 3 * kUs, "cuda_driver", "cuLaunchKernel", K::kLaunch, 7, 8);
  b.add_call(driver, "");
  engine::CallRun run;
  run.calls = 100;
  run.sum_ns = 600 * kUs;
  run.pid = 7;
  run.tid = 9;
  run.comm = {'p', 'y'};
  run.op = "cudaLaunchKernel";
  run.library = "/usr/local/cuda/lib64/libcudart.so.13";
  run.kind = K::kLaunch;
  run.stack_id = 0x10;
  b.add_run(run, "");
  b.add_cpu_sample({2000, 7, 8, 0x10}, 20'408'163, "python3", "");
  b.add_cpu_sample({3000, 7, 8, 0x10}, 20'408'163, "python3", "");
  b.set_period(20'408'163);
  b.set_window(1000, 9000);
  b.add_comment("test");
  EXPECT_EQ(lookups, 2);  // each stack read once
  auto t = b.totals();
  EXPECT_EQ(t.values[kCpu], 2 * 20'408'163);
  EXPECT_EQ(t.values[kGpuWait], int64_t(5 * kMs + 500 * kUs));
  EXPECT_EQ(t.values[kLaunches], 102);
  EXPECT_EQ(t.values[kGpuApi], int64_t(5 * kMs + 1200 * kUs + 8 * kUs + 600 * kUs));
  EXPECT_EQ(t.calls, 106u);
  EXPECT_EQ(t.cpu_samples, 2u);

  pp::Profile p;
  ASSERT_TRUE(p.ParseFromString(b.serialize()));
  ASSERT_EQ(p.sample_type_size(), 4);
  std::vector<std::string> types;
  for (const auto& st : p.sample_type())
    types.push_back(str(p, st.type()) + "/" + str(p, st.unit()));
  EXPECT_EQ(types, (std::vector<std::string>{"cpu/nanoseconds", "gpu_wait/nanoseconds",
                                             "launches/count", "gpu_api/nanoseconds"}));
  EXPECT_EQ(str(p, p.default_sample_type()), "gpu_wait");
  EXPECT_EQ(str(p, p.period_type().type()), "cpu");
  EXPECT_EQ(p.period(), 20'408'163);
  EXPECT_EQ(p.time_nanos(), 1000);
  EXPECT_EQ(p.duration_nanos(), 8000);
  EXPECT_EQ(str(p, 0), "");
  std::map<std::vector<std::string>, std::vector<int64_t>> by_stack;
  for (const auto& s : p.sample()) {
    auto& v = by_stack[stack_of(p, s)];
    v.resize(4);
    for (int i = 0; i < 4; ++i) v[size_t(i)] += s.value(i);
  }
  const std::string cudart = " [/usr/local/cuda/lib64/libcudart.so.13 cafe01 +0x0]";
  const std::vector<std::string> sync_stack = {"cudaStreamSynchronize" + cudart,
                                               "at::sync [/opt/app/bin/trainer b1d0 +0x1a2b]",
                                               "step /src/train.py:41", "main /src/train.py:90"};
  EXPECT_EQ(by_stack[sync_stack], (std::vector<int64_t>{0, int64_t(5 * kMs), 0, int64_t(5 * kMs)}));
  EXPECT_EQ(by_stack[(std::vector<std::string>{"cudaMemcpy" + cudart,
                                               " [/opt/app/bin/trainer b1d0 +0x2000]"})],
            (std::vector<int64_t>{0, int64_t(500 * kUs), 0, int64_t(1200 * kUs)}));
  EXPECT_EQ(by_stack[(std::vector<std::string>{"cudaLaunchKernel" + cudart})],
            (std::vector<int64_t>{0, 0, 1, int64_t(5 * kUs)}));
  EXPECT_EQ(by_stack[(std::vector<std::string>{"cudaLaunchKernel" + cudart,
                                               "at::sync [/opt/app/bin/trainer b1d0 +0x1a2b]",
                                               "step /src/train.py:41", "main /src/train.py:90"})],
            (std::vector<int64_t>{0, 0, 100, int64_t(600 * kUs)}));
  EXPECT_EQ(by_stack[(std::vector<std::string>{"at::sync [/opt/app/bin/trainer b1d0 +0x1a2b]",
                                               "step /src/train.py:41", "main /src/train.py:90"})],
            (std::vector<int64_t>{2 * 20'408'163, 0, 0, 0}));
  EXPECT_EQ(by_stack[(std::vector<std::string>{"cuLaunchKernel [/usr/lib/libcuda.so.1 d41 +0x0]"})],
            (std::vector<int64_t>{0, 0, 1, int64_t(3 * kUs)}));
  EXPECT_EQ(by_stack.size(), 6u);
  // Python frames have no mapping; the trainer's mapping knows functions but not lines.
  for (const auto& l : p.location()) {
    if (!l.line().empty() &&
        !str(p, p.function(int(l.line(0).function_id() - 1)).filename()).empty()) {
      EXPECT_EQ(l.mapping_id(), 0u);
    }
  }
  // The trainer first: the main binary, where the stacks start.
  ASSERT_EQ(p.mapping_size(), 3);
  EXPECT_EQ(str(p, p.mapping(0).filename()), "/opt/app/bin/trainer");
  EXPECT_TRUE(p.mapping(0).has_functions());
  EXPECT_FALSE(p.mapping(0).has_line_numbers());
  for (const auto& s : p.sample()) {
    auto l = labels_of(p, s);
    EXPECT_EQ(l["pid"], "7");
    EXPECT_TRUE(l["tid"] == "8" || l["tid"] == "9");
    EXPECT_EQ(l.count("node"), 0u);
  }
}

}  // namespace
}  // namespace ingero::serve::pprof
