// `ingero merge a.db b.db ... -o out.db`: per-node trace files (ours and the original
// implementation's) into one file with a node column. Every event is re-encoded through the
// TraceWriter, so source/op codes, libraries and sessions are renumbered consistently; the
// inputs are opened read-only and never modified.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "hal/event.h"
#include "store/call_count_check.h"
#include "store/event_rows.h"
#include "store/kernel_names.h"
#include "store/trace_queries.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace {

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// A node's trace as merged: its name, first and last event, and how many events it had. The
// same trace given twice (a file and its copy) would count every call twice.
using NodeTrace = std::tuple<std::string, int64_t, int64_t, size_t>;

// `last` gets the end of the last session begun: finish() writes it again. `seen` maps each
// node trace merged so far to its file.
ingero::Status merge_one(const std::string& in, const std::string& force_node,
                         store::TraceWriter& w, store::StringPool& strings, size_t* events,
                         store::SessionEnd& last, std::map<NodeTrace, std::string>& seen) {
  auto reader = store::TraceReader::open(in, builtin_views());
  if (!reader) return reader.error();
  store::Db& db = (*reader)->db();
  // Folded launches have no rows to re-encode, and summaries rebuilt from the rows left would
  // undercount them: refused rather than merged short.
  if (db.table_exists("call_runs")) {
    auto runs = db.query_int("SELECT count(*) FROM call_runs");
    if (!runs) return runs.error();
    if (runs->value_or(0) > 0)
      return ingero::make_error(in + ": " + std::to_string(**runs) +
                                " runs of folded launches (tiered retention); merge keeps "
                                "every call's row, so it takes traces recorded with --keep-all "
                                "or before folding began");
  }
  std::vector<std::string> nodes;
  if (force_node.empty()) {
    auto n = store::read_nodes(db);
    if (!n) return n.error();
    nodes = std::move(*n);
  }
  bool by_node = !nodes.empty();
  if (nodes.empty()) nodes.push_back("");
  auto first = store::first_event_ns(db);
  if (!first) return first.error();
  for (const std::string& src_node : nodes) {
    // Files without node names (schema 0.8) take --force-node, else the file's name.
    std::string node = !force_node.empty() ? force_node : !src_node.empty() ? src_node : stem(in);
    store::SessionInfo si;
    si.node = node;
    si.host = node;
    si.mono_offset_ns = 0;  // stored timestamps are already wall clock
    si.flags = "merged-from=" + in +
               ((*reader)->is_legacy() ? ",legacy=" + (*reader)->info().legacy_version : "");
    si.started_at_ns = first->value_or(0);
    if (auto s = w.begin_session(si); !s) return s.error();
    store::NodeFilter which = by_node ? store::NodeFilter(src_node) : std::nullopt;
    // What the node's sessions lost, and the libraries attached late, stay said: a merged file
    // must not read as complete where its inputs were not.
    auto losses = store::read_losses(db, which);
    if (!losses) return losses.error();
    auto late = store::read_late_libraries(db, which);
    if (!late) return late.error();
    for (const auto& l : *late)
      if (auto s = w.add_library(l); !s) return s.error();
    store::EventFilter filter;
    filter.node = which;
    size_t node_events = 0;
    int64_t first_ts = INT64_MAX, last_ts = INT64_MIN;
    auto add = [&](const hal::Event& e) -> ingero::Status {
      ++*events;
      ++node_events;
      first_ts = std::min(first_ts, int64_t(e.ts_ns));
      last_ts = std::max(last_ts, int64_t(e.ts_ns));
      return w.add(e);
    };
    using Rows = store::EventCursor::Rows;
    // In one snapshot, the calls read checked against the file's own counts: a damaged time
    // index ends the read early without an error (store/call_count_check.h). Host events are
    // read along the table, not the index.
    if (auto s = db.exec("BEGIN"); !s) return s;
    struct End {
      store::Db& db;
      ~End() { (void)db.exec("COMMIT"); }
    } end{db};
    store::CallCountCheck count(filter, {INT64_MIN, INT64_MAX});
    auto add_call = [&](const hal::Event& e) {
      count.add(int64_t(e.ts_ns));
      return add(e);
    };
    if (auto s = store::for_each_event(db, Rows::kCalls, filter, strings, add_call); !s) return s;
    if (!(*reader)->is_legacy())
      if (auto s = count.verify(db); !s) return s;
    store::EventFilter host = filter;
    host.scan = true;
    if (auto s = store::for_each_event(db, Rows::kHostEvents, host, strings, add); !s) return s;
    auto [twin, fresh] = seen.try_emplace({node, first_ts, last_ts, node_events}, in);
    if (!fresh && node_events)
      return ingero::make_error("node " + node + " has the same " + std::to_string(node_events) +
                                " events, first to last, as in " + twin->second +
                                ": the same trace twice would count every call twice");
    // Processes (merged by node + pid), snapshots.
    auto procs = store::read_process_names(db, which);
    if (!procs) return procs.error();
    for (const auto& p : *procs)
      if (auto s = w.note_process(p.pid, p.name, p.cmdline, 0); !s) return s;
    // Kernel names (by node + pid + function) and what the node's sessions could not name.
    auto kernels = store::read_kernel_names(db, which);
    if (!kernels) return kernels.error();
    for (const auto& k : *kernels)
      if (auto s = w.add_kernel_name(
              {k.pid, k.func, k.name, k.raw_name, hal::kernel_name_source_from(k.source), 0});
          !s)
        return s;
    auto naming = store::read_kernel_naming(db, which);
    if (!naming) return naming.error();
    if (*naming)
      if (auto s = w.update_kernel_naming(**naming); !s) return s;
    auto snaps = store::read_snapshots(db, which);
    if (!snaps) return snaps.error();
    for (const auto& r : *snaps)
      if (auto s = w.add_snapshot(r); !s) return s;
    if (auto s = w.commit(); !s) return s;
    // Ended, as its source was: a merged session with no stop time reads as still being written.
    auto stopped = store::read_stopped_at(db, which);
    if (!stopped) return stopped.error();
    last = {};
    last.stopped_at_ns = *stopped;
    last.counters = *losses;
    last.exit_reason = "merged";
    if (auto s = w.end_session(last); !s) return s;
  }
  // Stacks: the original implementation's by their hash; ours by a hash of their resolved
  // frames, so the same stack on two nodes is stored once.
  if (auto s = store::for_each_legacy_stack(db,
                                            [&](const store::LegacyStackRow& r) {
                                              return w.add_legacy_stack(r.hash, r.ips, r.frames);
                                            });
      !s)
    return s;
  if (auto s = store::for_each_stack(
          db,
          [&](uint64_t id, const std::vector<hal::StackFrame>& f) { return w.add_stack(id, f); });
      !s)
    return s;
  return w.commit();
}

// Merges into `tmp`; the caller renames it over the output only when everything succeeded.
ingero::Status merge_all(const std::vector<std::string>& inputs, const std::string& force_node,
                         const std::string& tmp, size_t* events) {
  auto w = store::TraceWriter::open(tmp, builtin_views());
  if (!w) return w.error();
  store::StringPool strings;
  store::SessionEnd end;
  std::map<NodeTrace, std::string> seen;
  for (const auto& in : inputs)
    if (auto s = merge_one(in, force_node, **w, strings, events, end, seen); !s)
      return ingero::make_error(in + ": " + s.error().message);
  return (*w)->finish(end);
}

}  // namespace

void add_merge_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "merge",
      "Merge per-node trace files (ours and the original implementation's) into one file with\n"
      "a node column: `ingero merge node-01.db node-02.db -o cluster.db`. Inputs are read-only.\n"
      "Files that carry no node name (schema 0.8) take --force-node or their file name.");
  struct Opts {
    std::vector<std::string> inputs;
    std::string out, force_node;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("inputs", o->inputs, "Trace files to merge")->required();
  cmd->add_option("-o,--out", o->out, "Merged trace file to create")->required();
  cmd->add_option("--force-node", o->force_node, "Node name for every event of every input");
  cmd->callback([&ctx, o] {
    if (std::filesystem::exists(o->out)) {
      std::cerr << "ingero merge: " << o->out << " exists; merge into a new file\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    for (const auto& in : o->inputs) {
      auto r = store::TraceReader::open(in, builtin_views());
      if (!r) {
        std::cerr << "ingero merge: " << r.error().message << "\n";
        ctx.exit_code = kExitFailure;
        return;
      }
    }
    // Written next to the output and renamed over it at the end: a merge that fails leaves
    // no partial file behind.
    std::filesystem::path out(o->out);
    std::string tmp = (out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path()) /
                      ("." + out.filename().string() + ".merging-" + std::to_string(getpid()));
    size_t events = 0;
    auto s = merge_all(o->inputs, o->force_node, tmp, &events);
    // RENAME_NOREPLACE: a file that appeared at the output meanwhile is not overwritten.
    if (s && renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, o->out.c_str(), RENAME_NOREPLACE) != 0)
      s = ingero::Error::sys("renaming " + tmp + " to " + o->out, errno);
    if (!s) {
      std::error_code ec;
      for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(tmp + suffix, ec);
      std::cerr << "ingero merge: " << s.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    std::cerr << "ingero merge: " << events << " events from " << o->inputs.size() << " files into "
              << o->out << "\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
