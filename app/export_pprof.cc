// `ingero export --format pprof`: the trace file's calls, folded runs and on-CPU samples as a
// pprof profile (serve/export/pprof.h), gzip-compressed, written through OutputFile.
#include <unistd.h>

#include <iostream>
#include <limits>
#include <set>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/export_options.h"
#include "app/output_file.h"
#include "app/read_error.h"
#include "compress/gzip.h"
#include "engine/node_selection.h"
#include "serve/export/pprof.h"
#include "store/sql_trace_source.h"
#include "store/stacks.h"

namespace ingero::app {
namespace {

// The on-CPU sampling rate ingero trace used when a session does not say (files before the
// session recorded cpu-sample-hz=N in its flags): the default, 49 Hz.
constexpr uint64_t kDefaultCpuSampleHz = 49;

struct SessionRate {
  std::string node;
  int64_t started = 0, stopped = 0;
  uint64_t hz = kDefaultCpuSampleHz;
};

// Each session's sampling rate, from its flags ("...,cpu-sample-hz=N,...").
std::vector<SessionRate> session_rates(store::Db& db) {
  std::vector<SessionRate> out;
  if (!db.table_exists("sessions")) return out;
  auto st =
      db.prepare("SELECT node, started_at, stopped_at, flags FROM sessions ORDER BY started_at");
  if (!st) return out;
  while (true) {
    auto row = st->step();
    if (!row || !*row) break;
    SessionRate r{st->text(0), st->int64(1), st->int64(2)};
    std::string flags = "," + st->text(3) + ",";
    size_t p = flags.find(",cpu-sample-hz=");
    if (p != std::string::npos) {
      uint64_t hz = std::strtoull(flags.c_str() + p + 15, nullptr, 10);
      if (hz > 0) r.hz = hz;
    }
    out.push_back(std::move(r));
  }
  return out;
}

// The libraries the trace attached: their build ids, and for each api the one file it
// attached, when it attached one (a host with two copies of libcudart leaves the op's frame
// without a mapping rather than guess).
serve::pprof::Libraries probed_libraries(store::Db& db) {
  serve::pprof::Libraries out;
  if (!db.table_exists("libraries") || !db.column_exists("libraries", "build_id")) return out;
  auto st =
      db.prepare("SELECT api, path, build_id FROM libraries WHERE probes_attached > 0 ORDER BY id");
  if (!st) return out;
  std::map<std::string, std::set<std::pair<std::string, std::string>>> files;
  while (true) {
    auto row = st->step();
    if (!row || !*row) break;
    if (!st->text(2).empty()) out.build_ids[st->text(1)] = st->text(2);
    files[st->text(0)].insert({st->text(1), st->text(2)});
  }
  for (const auto& [api, set] : files)
    if (set.size() == 1) out.by_api[api] = *set.begin();
  return out;
}

// The frames of stored stacks as the profile needs them, build ids included; the first read
// error is kept in `error`.
serve::pprof::StackFn stored_stacks(store::Db& db, std::string& error) {
  return [&db, &error](uint64_t id) {
    std::vector<serve::pprof::Frame> out;
    auto frames = store::read_stack(db, int64_t(id));
    if (!frames) {
      if (error.empty()) error = frames.error().message;
      return out;
    }
    if (!*frames) return out;
    for (const auto& f : **frames)
      out.push_back(
          {f.python, f.function, f.file, f.line, f.module,
           f.module_offset ? std::optional<uint64_t>(uint64_t(*f.module_offset)) : std::nullopt,
           f.build_id});
    return out;
  };
}

// What to read: the window asked for (its end pinned: a trace still being written must not
// change between the reads), one per node, and each session's sampling period.
ingero::Result<serve::pprof::Reading> reading_of(store::SqlTraceSource& source, const ExportOpts& o,
                                                 std::vector<SessionRate> rates) {
  engine::WindowSpec spec = o.w;
  if (o.pid) spec.pid = o.pid;
  auto w = engine::resolve_window(source, spec);
  if (!w) return w.error();
  // A pid the trace does not name is a usage error, as perfetto's and explain's are (the
  // profile was written empty, exit 0).
  if (o.pid)
    if (auto st = engine::check_pid(source.processes(), o.pid); !st) return st.error();
  if (w->to_ns == std::numeric_limits<int64_t>::max()) w->to_ns = source.time_span().second;
  std::vector<std::string> have = source.nodes();
  auto nodes = engine::pick_nodes(
      have.size() < 2 && o.nodes.empty() ? std::vector<std::string>{""} : have, o.nodes);
  if (!nodes) return nodes.error();
  serve::pprof::Reading reading;
  for (const auto& n : *nodes) {
    engine::Window nw = *w;
    if (!n.empty()) nw.node = n;
    reading.windows.emplace_back(n, nw);
  }
  reading.cpu_period_ns = [rates = std::move(rates)](const std::string& node, int64_t ts) {
    uint64_t hz = kDefaultCpuSampleHz;
    for (const auto& r : rates)  // the latest session of the node that began before ts
      if ((node.empty() || r.node == node) && r.started <= ts) hz = r.hz;
    return uint64_t(1'000'000'000) / hz;
  };
  return reading;
}

int fail(const std::string& message, int code = kExitFailure) {
  std::cerr << "ingero export: " << message << "\n";
  return code;
}

}  // namespace

int run_pprof_export(const ExportOpts& o) {
  if (!o.source.empty())
    return fail("--format pprof reads a trace file (--db), not --source", kExitUsage);
  if ((o.out.empty() || o.out == "-") && isatty(STDOUT_FILENO))
    return fail("a pprof profile is binary (gzip): give -o FILE, or redirect standard output",
                kExitUsage);
  std::string path = o.db.empty() ? default_db_path() : o.db;
  auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
  if (!reader) return fail(reader.error().message);
  store::Db& db = (*reader)->db();
  store::SqlTraceSource source(**reader);
  auto reading = reading_of(source, o, session_rates(db));
  if (!reading) return fail(reading.error().message, kExitUsage);
  auto out = OutputFile::open(o.out, o.force, {path});
  if (!out) return fail(out.error().message);

  std::string stack_error;
  serve::pprof::ProfileBuilder builder(stored_stacks(db, stack_error), probed_libraries(db));
  const auto& [first_node, first] = reading->windows.front();
  builder.set_node_label(reading->windows.size() > 1);
  // The period at the window's start, or the trace's where the window has none (a window from
  // the beginning of time found no session, and gave the default rate's period).
  auto span = source.time_span();
  builder.set_period(reading->cpu_period_ns(first_node, std::max(first.from_ns, span.first)));
  builder.set_window(std::max(first.from_ns, span.first), std::min(first.to_ns, span.second));
  builder.add_comment("ingero export --format pprof " + path);
  serve::pprof::read_profile(source, *reading, builder);
  std::string error = !source.error().empty() ? source.error() : stack_error;
  // A read error leaves no output file: the temporary file goes with `out`.
  if (!error.empty()) return fail(reading_error(path, error));
  auto z = compress::gzip(builder.serialize());
  if (!z) return fail(z.error().message);
  if (auto st = (*out)->write(*z); !st) return fail(st.error().message);
  if (auto st = (*out)->commit(); !st) return fail(st.error().message);
  auto t = builder.totals();
  std::cerr << "ingero export: pprof profile of " << t.calls << " calls and " << t.cpu_samples
            << " on-CPU samples (" << t.samples << " samples; cpu " << t.values[serve::pprof::kCpu]
            << " ns, gpu_wait " << t.values[serve::pprof::kGpuWait] << " ns, launches "
            << t.values[serve::pprof::kLaunches] << ", gpu_api " << t.values[serve::pprof::kGpuApi]
            << " ns) written to " << (*out)->path() << "\n";
  return kExitOk;
}

}  // namespace ingero::app
