// `ingero export --format pprof`: the profile's structure (sample types, merged Python and
// native frames, mappings with build ids, labels), and a folded synthetic training trace read
// back by `go tool pprof` (Debian's golang-go, a tool the project did not write) with exact
// totals per sample type against `ingero query` over the same file.
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
#include "tests/unit/tiers_fixture.h"

namespace ingero::serve::pprof {
namespace {

namespace pp = perftools::profiles;
using store::tiers_fixture::call;
using store::tiers_fixture::kMs;
using store::tiers_fixture::kUs;

std::string str(const pp::Profile& p, int64_t i) { return p.string_table(int(i)); }

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

std::map<std::string, std::string> labels_of(const pp::Profile& p, const pp::Sample& s) {
  std::map<std::string, std::string> out;
  for (const auto& l : s.label())
    out[str(p, l.key())] = l.str() ? str(p, l.str()) : std::to_string(l.num());
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

std::string run_ok(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
  std::string out, err;
  int rc = test::run_command(argv, &out, &err, env);
  EXPECT_EQ(rc, 0) << argv[0] << " " << (argv.size() > 1 ? argv[1] : "") << ": " << err;
  return out;
}

int64_t query_one(const std::string& db, const std::string& sql) {
  auto j = nlohmann::json::parse(run_ok({INGERO_BIN, "query", "--json", "--db", db, sql}));
  EXPECT_EQ(j.size(), 1u) << j.dump();
  const auto& v = j[0].begin().value();
  return v.is_null() ? 0 : v.get<int64_t>();
}

// `calls` written as one ended session in `name`.db and exported as pprof: the profile's path
// ("" where either failed), the trace's in `db`, export's stderr in `err`.
std::string exported(const std::vector<hal::Event>& calls, const std::string& name,
                     std::string* db, std::string* err) {
  std::string path = *db = test::temp_path(name + ".db");
  {
    auto w = store::tiers_fixture::begin_trace(path);
    if (!w) return "";
    for (const auto& e : calls)
      if (!w->add(e)) return "";
    if (!w->finish(store::SessionEnd{})) return "";
  }
  std::string out = test::temp_path(name + ".pb.gz");
  int rc = test::run_command({INGERO_BIN, "export", "--format", "pprof", "--db", path, "-o", out},
                             nullptr, err);
  return rc == 0 ? out : "";
}

// A written profile, read back with our own definitions.
std::optional<pp::Profile> read_profile(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  std::stringstream raw;
  raw << f.rdbuf();
  auto plain = compress::gunzip(raw.str());
  pp::Profile p;
  if (!plain || !p.ParseFromString(*plain)) return std::nullopt;
  return p;
}

// Sums of each sample type over `go tool pprof -raw`'s samples.
std::vector<int64_t> pprof_raw_totals(const std::string& file) {
  std::string out =
      run_ok({INGERO_GO, "tool", "pprof", "-raw", file}, {"HOME=" + test::scratch_root()});
  std::istringstream in(out);
  std::vector<int64_t> sums;
  bool samples = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Samples:", 0) == 0) {
      samples = true;
      continue;
    }
    if (line.rfind("Locations", 0) == 0) break;
    size_t colon = line.find(':');
    if (!samples || colon == std::string::npos) continue;
    std::istringstream vals(line.substr(0, colon));
    std::vector<int64_t> v;
    bool numbers = true;
    for (std::string tok; vals >> tok;) {
      if (tok.find_first_not_of("-0123456789") != std::string::npos) {
        numbers = false;
      } else {
        v.push_back(std::stoll(tok));
      }
    }
    if (!numbers || v.empty()) continue;
    sums.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) sums[i] += v[i];
  }
  return sums;
}

bool have_go() {
  if (*INGERO_GO && access(INGERO_GO, X_OK) == 0) return true;
  return false;
}

#define REQUIRE_GO()                                                                  \
  do {                                                                                \
    if (!have_go()) {                                                                 \
      if (test::running_in_ci()) FAIL() << "CI=true but `go` (golang-go) is missing"; \
      GTEST_SKIP() << "*** SKIPPED: no `go` (golang-go) to run go tool pprof ***";    \
    }                                                                                 \
  } while (0)

// A training loop, its stacks stored, launches folded into runs (tiered retention): every
// call, run and on-CPU sample lands in the profile, with the totals `query` gives.
TEST(PprofExport, GoToolPprofTotalsEqualQueryOverAFoldedTrace) {
  REQUIRE_GO();
  using namespace store::tiers_fixture;
  auto loop = training_loop(30);
  std::string path = test::temp_path("loop.db");
  {
    auto w = begin_trace(path);
    ASSERT_TRUE(w);
    hal::StackFrame f;
    f.module = "/opt/app/bin/trainer";
    f.module_offset = 0x4242;
    f.build_id = "0123abcd";
    f.function = "launch_all";
    f.file = "/src/loop.c";
    f.line = 12;
    ASSERT_TRUE(w->add_stack(0x1111, {f}));
    hal::StackFrame py;
    py.python = true;
    py.function = "read_loss";
    py.file = "train.py";
    py.line = 77;
    ASSERT_TRUE(w->add_stack(0x2222, {py}));
    for (const auto& e : loop.calls) ASSERT_TRUE(w->add(e));
    ASSERT_TRUE(w->finish(store::SessionEnd{}));
  }
  auto folded = fold_everything(path);
  ASSERT_GT(folded.folded, 0u);
  std::string out = test::temp_path("loop.pb.gz"), err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "export", "--format", "pprof", "--db", path, "-o", out},
                              nullptr, &err),
            0)
      << err;
  const int64_t period = 1'000'000'000 / 49;  // no cpu-sample-hz in the session: the default
  const int64_t samples =
      query_one(path, "SELECT count(*) FROM host_events WHERE event = 'cpu_sample'");
  const int64_t waits = query_one(path,
                                  "SELECT sum(dur_ns) FROM calls WHERE kind = 'sync' OR (kind = "
                                  "'memcpy' AND direction = 'D2H')");
  const int64_t launches = query_one(
      path, "SELECT sum(calls) FROM call_summaries WHERE kind IN ('launch', 'graph_launch')");
  const int64_t api = query_one(path, "SELECT sum(sum_ns) FROM call_summaries");
  EXPECT_EQ(samples, 30 * 8);
  EXPECT_EQ(launches, int64_t(loop.launches));
  EXPECT_EQ(pprof_raw_totals(out), (std::vector<int64_t>{samples * period, waits, launches, api}));
  std::string err2;
  EXPECT_TRUE(err.find("written to " + out) != std::string::npos) << err;
  // The top of each sample type, as go tool pprof ranks it.
  std::string top =
      run_ok({INGERO_GO, "tool", "pprof", "-top", "-symbolize=none", "-sample_index=gpu_wait", out},
             {"HOME=" + test::scratch_root()});
  EXPECT_NE(top.find("cudaMemcpyAsync"), std::string::npos) << top;
  // The profile as stored: decoded with our own definitions too.
  std::ifstream f(out, std::ios::binary);
  std::stringstream raw;
  raw << f.rdbuf();
  auto plain = compress::gunzip(raw.str());
  ASSERT_TRUE(plain);
  pp::Profile p;
  ASSERT_TRUE(p.ParseFromString(*plain));
  EXPECT_EQ(p.period(), period);
}

// Launches seen at entry only count in gpu_api at their process and op's mean timed duration,
// as explain reads them: the total is the SQL docs/cli.md gives, and more than the timed
// calls' own total.
TEST(PprofExport, GpuApiCountsEntryOnlyLaunchesAtTheirMean) {
  REQUIRE_GO();
  using namespace store::tiers_fixture;
  auto loop = training_loop(20);
  size_t n = 0, untimed = 0;
  for (auto& e : loop.calls)
    if (e.kind == hal::EventKind::kLaunch && n++ % 4 != 0) {
      e.timed = false;
      e.has_ret = false;
      ++untimed;
    }
  ASSERT_GT(untimed, 100u);
  std::string path, err, out = exported(loop.calls, "untimed", &path, &err);
  ASSERT_FALSE(out.empty()) << err;
  const int64_t timed_only = query_one(path, "SELECT sum(sum_ns) FROM call_summaries");
  const int64_t with_means = query_one(
      path,
      "SELECT sum(sum_ns + (calls - timed) * mean) FROM (SELECT sum(sum_ns) AS sum_ns, "
      "sum(calls) AS calls, sum(timed) AS timed, coalesce(sum(sum_ns) / nullif(sum(timed), 0), "
      "0) AS mean FROM call_seconds GROUP BY pid, source, op)");
  EXPECT_GT(with_means, timed_only);
  EXPECT_EQ(pprof_raw_totals(out)[3], with_means);
}

// A comm that is not UTF-8 (any process may take one) is written as UTF-8: proto3 strings are,
// and a profile with one that is not fails to parse in strict readers.
TEST(PprofExport, ACommThatIsNotUtf8IsWrittenAsUtf8) {
  using namespace store::tiers_fixture;
  auto loop = training_loop(2);
  for (auto& e : loop.calls)
    e.set_comm(
        "\xFF\xFE"
        "bad");
  std::string path, err, out = exported(loop.calls, "badcomm", &path, &err);
  ASSERT_FALSE(out.empty()) << err;
  EXPECT_EQ(err.find("libprotobuf"), std::string::npos) << err;
  auto p = read_profile(out);
  ASSERT_TRUE(p);
  EXPECT_NE(std::find(p->string_table().begin(), p->string_table().end(),
                      "\xEF\xBF\xBD\xEF\xBF\xBD"
                      "bad"),
            p->string_table().end());
}

// The windows of --since, --pid and --node: exactly the calls and samples they name, for
// pprof; an unknown node names the ones there are; a binary profile is not written to a
// terminal and not read from ClickHouse.
TEST(PprofExport, SincePidAndNodeSelectWhatTheyName) {
  using namespace store::tiers_fixture;
  auto loop = training_loop(10);
  std::string path = test::temp_path("window.db");
  {
    auto w = begin_trace(path);
    ASSERT_TRUE(w);
    for (auto e : loop.calls) {
      ASSERT_TRUE(w->add(e));
      if (e.kind == hal::EventKind::kSync) {  // another process's sync beside each
        e.pid = e.tid = 20;
        e.dur_ns = 7 * kUs;
        ASSERT_TRUE(w->add(e));
      }
    }
    ASSERT_TRUE(w->finish(store::SessionEnd{}));
  }
  auto profile = [&](const std::vector<std::string>& extra, Totals* t) {
    std::string out = test::temp_path("w.pb.gz"), err;
    std::vector<std::string> argv = {INGERO_BIN, "export", "--format", "pprof",  "--db",
                                     path,       "-o",     out,        "--force"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    int rc = test::run_command(argv, nullptr, &err);
    if (rc != 0) return err;
    std::ifstream f(out, std::ios::binary);
    std::stringstream raw;
    raw << f.rdbuf();
    pp::Profile p;
    auto plain = compress::gunzip(raw.str());
    EXPECT_TRUE(plain && p.ParseFromString(*plain));
    *t = Totals{};
    for (const auto& s : p.sample())
      for (int i = 0; i < kSampleTypes; ++i) t->values[size_t(i)] += s.value(i);
    t->samples = size_t(p.sample_size());
    return std::string();
  };
  Totals all, only20, last;
  ASSERT_EQ(profile({}, &all), "");
  ASSERT_EQ(profile({"--pid", "20"}, &only20), "");
  // --since counts back from the trace's last event, a call or a host event.
  const int64_t last_ns = query_one(path,
                                    "SELECT max(t) FROM (SELECT max(ts_ns) AS t FROM calls UNION "
                                    "ALL SELECT max(ts_ns) FROM host_events)");
  ASSERT_EQ(profile({"--since", "0.1s"}, &last), "");
  EXPECT_EQ(all.values[kGpuWait],
            query_one(path,
                      "SELECT sum(dur_ns) FROM calls WHERE kind = 'sync' OR (kind = "
                      "'memcpy' AND direction = 'D2H')"));
  EXPECT_EQ(only20.values[kGpuWait], 10 * int64_t(7 * kUs));  // its ten syncs, nothing else
  EXPECT_EQ(only20.values[kCpu], 0);
  EXPECT_EQ(only20.values[kLaunches], 0);
  EXPECT_EQ(last.values[kGpuApi], query_one(path, "SELECT sum(dur_ns) FROM calls WHERE ts_ns >= " +
                                                      std::to_string(last_ns - 100'000'000)));
  EXPECT_LT(last.values[kGpuApi], all.values[kGpuApi]);
  Totals none;
  EXPECT_EQ(profile({"--node", "n2"}, &none),
            "ingero export: no node 'n2' in this trace (nodes: n1)\n");
  EXPECT_EQ(profile({"--node", "n1"}, &none), "");
  EXPECT_EQ(none.values, all.values);
  std::string err;
  EXPECT_EQ(test::run_command({INGERO_BIN, "export", "--format", "pprof", "--source",
                               "clickhouse://127.0.0.1:1/db"},
                              nullptr, &err),
            2);
  EXPECT_EQ(err, "ingero export: --format pprof reads a trace file (--db), not --source\n");
  // perfetto takes the same window: pid 20's calls only.
  std::string json;
  ASSERT_EQ(test::run_command({INGERO_BIN, "export", "--db", path, "--pid", "20"}, &json, &err), 0)
      << err;
  auto events = nlohmann::json::parse(json);
  size_t calls = 0;
  for (const auto& e : events)
    if (e.value("cat", "") == "cuda") {
      ++calls;
      EXPECT_EQ(e["name"], "cudaStreamSynchronize");
    }
  EXPECT_EQ(calls, 10u);
}

// A merged file of two nodes: --node keeps one node's calls (both formats), and without it
// the pprof samples carry a node label.
TEST(PprofExport, NodeOfAMergedFile) {
  using namespace store::tiers_fixture;
  auto write_node = [](const std::string& path, const std::string& node, int syncs) {
    auto w = store::TraceWriter::open(path);
    ASSERT_TRUE(w);
    store::SessionInfo si;
    si.node = node;
    si.mono_offset_ns = kOffset;
    ASSERT_TRUE((*w)->begin_session(si));
    for (int i = 0; i < syncs; ++i)
      ASSERT_TRUE((*w)->add(call(1000 + uint64_t(i) * kMs, 100 * kUs, "cuda_runtime",
                                 "cudaStreamSynchronize", hal::EventKind::kSync)));
    ASSERT_TRUE((*w)->finish(store::SessionEnd{}));
  };
  std::string a = test::temp_path("a.db"), b = test::temp_path("b.db"), m = test::temp_path("m.db"),
              err;
  write_node(a, "n1", 3);
  write_node(b, "n2", 5);
  ASSERT_EQ(test::run_command({INGERO_BIN, "merge", a, b, "-o", m}, nullptr, &err), 0) << err;
  auto read = [&](const std::vector<std::string>& extra) {
    std::string out = test::temp_path("m.pb.gz");
    std::vector<std::string> argv = {INGERO_BIN, "export", "--format", "pprof",  "--db",
                                     m,          "-o",     out,        "--force"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    std::string e;
    EXPECT_EQ(test::run_command(argv, nullptr, &e), 0) << e;
    std::ifstream f(out, std::ios::binary);
    std::stringstream raw;
    raw << f.rdbuf();
    pp::Profile p;
    auto plain = compress::gunzip(raw.str());
    EXPECT_TRUE(plain && p.ParseFromString(*plain));
    std::map<std::string, int64_t> wait_by_node;
    for (const auto& s : p.sample()) wait_by_node[labels_of(p, s)["node"]] += s.value(kGpuWait);
    return wait_by_node;
  };
  EXPECT_EQ(read({}), (std::map<std::string, int64_t>{{"n1", 3 * int64_t(100 * kUs)},
                                                      {"n2", 5 * int64_t(100 * kUs)}}));
  EXPECT_EQ(read({"--node", "n2"}), (std::map<std::string, int64_t>{{"", 5 * int64_t(100 * kUs)}}));
  std::string json;
  ASSERT_EQ(test::run_command({INGERO_BIN, "export", "--db", m, "--node", "n2"}, &json, &err), 0)
      << err;
  size_t calls = 0;
  for (const auto& e : nlohmann::json::parse(json)) {
    if (e.value("cat", "") == "cuda") ++calls;
    if (e.value("name", "") == "process_name") {
      EXPECT_EQ(e["args"]["name"].get<std::string>().rfind("n2 / ", 0), 0u) << e.dump();
    }
  }
  EXPECT_EQ(calls, 5u);
}

// The original implementation's files export too: their calls and stacks, node by node.
TEST(PprofExport, TheOriginalImplementationsFiles) {
  std::string file = INGERO_FIXTURES_DIR "/ingero-go/sample-cluster.db";
  std::string out = test::temp_path("legacy.pb.gz"), err;
  ASSERT_EQ(test::run_command({INGERO_BIN, "export", "--format", "pprof", "--db", file, "-o", out},
                              nullptr, &err),
            0)
      << err;
  std::ifstream f(out, std::ios::binary);
  std::stringstream raw;
  raw << f.rdbuf();
  pp::Profile p;
  auto plain = compress::gunzip(raw.str());
  ASSERT_TRUE(plain && p.ParseFromString(*plain));
  int64_t api = 0;
  std::set<std::string> nodes;
  size_t with_stack = 0;
  for (const auto& s : p.sample()) {
    api += s.value(kGpuApi);
    nodes.insert(labels_of(p, s)["node"]);
    with_stack += s.location_id_size() > 1;
  }
  EXPECT_EQ(api, query_one(file, "SELECT sum(dur_ns) FROM calls"));
  EXPECT_EQ(nodes.size(), size_t(query_one(file, "SELECT count(DISTINCT node) FROM calls")));
  EXPECT_GT(with_stack, 0u);
}

}  // namespace
}  // namespace ingero::serve::pprof
