// What `ingero merge a.db b.db ... -o out.db` does (app/cmd_merge.cc): per-node trace files
// (ours and the original implementation's) into one file with a node column. Every event is
// re-encoded through the TraceWriter, so source/op codes, libraries and sessions are renumbered
// consistently; the inputs are opened read-only and never modified. `compact` converts a file
// of an older schema the same way.
#include "app/merge_traces.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/output_file.h"
#include "app/read_error.h"
#include "app/temp_files.h"
#include "engine/chain.h"
#include "hal/event.h"
#include "store/call_count_check.h"
#include "store/compact.h"
#include "store/copy_rows.h"
#include "store/event_rows.h"
#include "store/file_access.h"
#include "store/folded_calls.h"
#include "store/kernel_names.h"
#include "store/legacy_views.h"
#include "store/read_snapshot.h"
#include "store/trace_queries.h"
#include "store/trace_reader.h"
#include "store/trace_writer.h"

namespace ingero::app {
namespace {

std::string stem(const std::string& path) { return std::filesystem::path(path).stem().string(); }

// One node of an input as merge writes it: its name in the file (nullopt: the whole file, which
// has no node names or takes --force-node) and in the output.
struct InputNode {
  store::NodeFilter which;
  std::string node;
};

ingero::Result<std::vector<InputNode>> input_nodes(store::Db& db, const std::string& in,
                                                   const std::string& force_node) {
  std::vector<InputNode> out;
  if (force_node.empty()) {
    auto n = store::read_nodes(db);
    if (!n) return n.error();
    for (const auto& node : *n) out.push_back({node, node.empty() ? stem(in) : node});
    // No event names a node (a file of samples and counters only): its sessions' one node.
    if (out.empty() && db.column_exists("sessions", "node")) {
      auto one = db.prepare("SELECT DISTINCT node FROM sessions WHERE node <> '' LIMIT 2");
      if (!one) return one.error();
      std::vector<std::string> named;
      while (true) {
        auto r = one->step();
        if (!r) return r.error();
        if (!*r) break;
        named.push_back(one->text(0));
      }
      if (named.size() == 1) out.push_back({named[0], named[0]});
    }
  }
  // Files without node names (schema 0.8) take --force-node, else the file's name.
  if (out.empty()) out.push_back({std::nullopt, force_node.empty() ? stem(in) : force_node});
  return out;
}

// The sessions a node of an input brings, by identity (node + start + host), named as the
// output will name them. A file with no sessions row stands for one session, started at its
// first event.
ingero::Result<std::vector<store::SessionIdentity>> node_sessions(store::Db& db, const InputNode& n,
                                                                  const std::string& force_node) {
  auto ids = store::read_session_identities(db, n.which);
  if (!ids) return ids.error();
  for (auto& id : *ids)
    if (!force_node.empty() || id.node.empty()) id.node = n.node;
  if (ids->empty()) {
    auto first = store::first_event_ns(db);
    if (!first) return first.error();
    ids->push_back({n.node, "", first->value_or(0)});
  }
  return std::move(*ids);
}

// Copies `tables` of `db` into the writer's file, in one transaction: the rows of `which` node
// (all: nullopt), in `session` where given, renamed `node` where given (--force-node).
ingero::Status carry_rows(store::Db& db, store::TraceWriter& w,
                          std::initializer_list<const char*> tables, const store::NodeFilter& which,
                          std::optional<int64_t> session, const std::string& node) {
  if (auto s = w.commit(); !s) return s;
  store::Db& out = w.db();
  if (auto s = out.exec("BEGIN"); !s) return s;
  for (const char* t : tables) {
    auto n = store::copy_rows(db, out, t, which, session, node);
    if (!n) {
      (void)out.exec("ROLLBACK");
      return n.error();
    }
  }
  return out.exec("COMMIT");
}

// Folded launches have no rows to re-encode, and summaries rebuilt from the rows left would
// undercount them: refused rather than merged short.
// The reader's TEMP `call_runs` of a schema 9 file folded while tracing shows none of its runs
// (their calls' copies stand for them): it was merged short, and said to be damaged.
// A file of schema 10 and later keeps a block's runs beside its rows until the block is folded
// for good (`full` NULL: tiered retention, --full-rows): its launches then have no row, and the
// merge was refused by its count check as "damaged".
ingero::Status refuse_folded_launches(store::Db& db, const std::string& in) {
  auto runs = store::older_folded_runs(db);
  if (!runs) return runs.error();
  if (db.is_table("call_store")) {
    auto stored = db.query_int("SELECT coalesce(sum(runs), 0) FROM call_store WHERE full IS NULL");
    if (!stored) return stored.error();
    *runs += stored->value_or(0);
  }
  if (*runs > 0)
    return ingero::make_error(in + ": " + std::to_string(*runs) +
                              " runs of folded launches (tiered retention); merge keeps "
                              "every call's row, so it takes traces recorded with --keep-all "
                              "or before folding began");
  return {};
}

// What the node's sessions recorded, as their flags say (docs/schema.md, sessions.flags): the
// flags every one of them has, each ",FLAG". The on-CPU sampling rate is what each sample is
// worth (export --format pprof); sessions sampled at different rates are said, and their
// merged session takes the first's.
ingero::Result<std::string> shared_flags(store::Db& db, const std::string& in, const InputNode& n) {
  if (!db.table_exists("sessions") || !db.column_exists("sessions", "flags")) return std::string();
  const bool by_node = n.which && db.column_exists("sessions", "node");
  auto st = db.prepare(std::string("SELECT flags FROM sessions") +
                       (by_node ? " WHERE node = ?1" : "") + " ORDER BY started_at");
  if (!st) return st.error();
  if (by_node) st->bind(1, *n.which);
  std::vector<std::string> common;
  std::set<std::string> rates;
  bool first = true;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    std::vector<std::string> flags;
    std::string text = st->text(0);
    for (size_t at = 0; at <= text.size();) {
      size_t comma = std::min(text.find(',', at), text.size());
      if (comma > at) flags.push_back(text.substr(at, comma - at));
      at = comma + 1;
    }
    for (const auto& f : flags)
      if (f.rfind("cpu-sample-hz=", 0) == 0) rates.insert(f);
    if (first)
      common = flags;
    else
      std::erase_if(common, [&](const std::string& f) {
        return f.rfind("cpu-sample-hz=", 0) != 0 &&
               std::find(flags.begin(), flags.end(), f) == flags.end();
      });
    first = false;
  }
  if (rates.size() > 1) {
    std::string said;
    for (const auto& r : rates) said += (said.empty() ? "" : ", ") + r.substr(14) + " Hz";
    std::cerr << "ingero merge: " << in << ": node " << n.node
              << "'s sessions sampled on-CPU stacks at different rates (" << said
              << "); its merged session is one, and its samples are each worth the first "
                 "session's period\n";
  }
  std::string out;
  bool rate_kept = false;
  for (const auto& f : common) {
    if (f.rfind("cpu-sample-hz=", 0) == 0) {
      if (rate_kept) continue;
      rate_kept = true;
    }
    out += "," + f;
  }
  return out;
}

// The output session of one node of an input, and the source sessions it holds: a later merge
// of this output with one of its inputs is refused, not counted twice.
ingero::Status begin_node_session(store::TraceReader& reader, const std::string& in,
                                  const InputNode& n, const std::string& force_node,
                                  int64_t started_at_ns, store::TraceWriter& w) {
  store::SessionInfo si;
  si.node = n.node;
  si.host = n.node;
  si.mono_offset_ns = 0;  // stored timestamps are already wall clock
  auto kept = shared_flags(reader.db(), in, n);
  if (!kept) return kept.error();
  si.flags = "merged-from=" + in +
             (reader.is_legacy() ? ",legacy=" + reader.info().legacy_version : "") + *kept;
  si.started_at_ns = started_at_ns;
  if (auto s = w.begin_session(si); !s) return s.error();
  auto ids = node_sessions(reader.db(), n, force_node);
  if (!ids) return ids.error();
  return w.add_merged_sessions(*ids);
}

// The node's calls, checked against the file's own counts (a damaged time index ends the read
// early without an error: store/call_count_check.h), then its host events, read along the table,
// not the index. The caller holds the read snapshot.
ingero::Status copy_node_events(store::TraceReader& reader, const store::NodeFilter& which,
                                store::TraceWriter& w, store::StringPool& strings, size_t* events) {
  store::Db& db = reader.db();
  store::EventFilter filter;
  filter.node = which;
  filter.rows = true;  // every call's row (schema 10 also keeps a folded form)
  auto add = [&](const hal::Event& e) -> ingero::Status {
    ++*events;
    return w.add(e);
  };
  using Rows = store::EventCursor::Rows;
  store::CallCountCheck count(filter, {INT64_MIN, INT64_MAX});
  auto add_call = [&](const hal::Event& e) {
    count.add(int64_t(e.ts_ns));
    return add(e);
  };
  if (auto s = store::for_each_event(db, Rows::kCalls, filter, strings, add_call); !s) return s;
  if (!reader.is_legacy())
    if (auto s = count.verify(db); !s) return s;
  store::EventFilter host = filter;
  host.scan = true;
  return store::for_each_event(db, Rows::kHostEvents, host, strings, add);
}

// Processes (merged by node + pid), kernel names (by node + pid + function) and what the node's
// sessions could not name, and snapshots.
ingero::Status copy_node_names(store::Db& db, const store::NodeFilter& which,
                               store::TraceWriter& w) {
  auto procs = store::read_process_names(db, which);
  if (!procs) return procs.error();
  for (const auto& p : *procs)
    if (auto s = w.note_process(p.pid, p.name, p.cmdline, 0); !s) return s;
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
  return {};
}

// Ended, as its source was: a merged session with no stop time reads as still being written.
// Its losses stay said: a merged file must not read as complete where its inputs were not.
ingero::Status end_node_session(store::Db& db, const store::NodeFilter& which,
                                const hal::SessionCounters& losses, store::TraceWriter& w,
                                store::SessionEnd& last) {
  auto stopped = store::read_stopped_at(db, which);
  if (!stopped) return stopped.error();
  last = {};
  last.stopped_at_ns = *stopped;
  last.counters = losses;
  last.exit_reason = "merged";
  return w.end_session(last);
}

// One node of an input into a session of its own.
ingero::Status merge_node(store::TraceReader& reader, const std::string& in, const InputNode& n,
                          const std::string& force_node, int64_t started_at_ns,
                          store::TraceWriter& w, store::StringPool& strings, size_t* events,
                          store::SessionEnd& last) {
  store::Db& db = reader.db();
  const store::NodeFilter& which = n.which;
  // One read snapshot for the node: what its sessions lost as of the events copied (an input
  // still being traced commits meanwhile).
  if (auto s = db.exec("BEGIN"); !s) return s;
  store::ReadSnapshot end(db, store::ReadSnapshot::kAdopt);
  if (auto s = begin_node_session(reader, in, n, force_node, started_at_ns, w); !s) return s;
  // What the node's sessions lost, and the libraries attached late, stay said.
  auto losses = store::read_losses(db, which);
  if (!losses) return losses.error();
  auto late = store::read_late_libraries(db, which);
  if (!late) return late.error();
  for (const auto& l : *late)
    if (auto s = w.add_library(l); !s) return s.error();
  if (auto s = copy_node_events(reader, which, w, strings, events); !s) return s;
  if (auto s = copy_node_names(db, which, w); !s) return s;
  if (auto s = w.commit(); !s) return s;
  if (auto s = end_node_session(db, which, *losses, w, last); !s) return s;
  // What the samplers and the analysis wrote beside the events, as it was.
  return carry_rows(db, w, {"process_stats", "device_counters", "causal_chains", "inflight"}, which,
                    w.session_id(), force_node);
}

// Stacks: the original implementation's by their hash; ours by a hash of their resolved
// frames, so the same stack on two nodes is stored once.
ingero::Status merge_stacks(store::Db& db, store::TraceWriter& w) {
  if (auto s = store::for_each_legacy_stack(db,
                                            [&](const store::LegacyStackRow& r) {
                                              return w.add_legacy_stack(r.hash, r.ips, r.frames);
                                            });
      !s)
    return s;
  return store::for_each_stack(
      db, [&](uint64_t id, const std::vector<hal::StackFrame>& f) { return w.add_stack(id, f); });
}

ingero::Status merge_one(const std::string& in, const std::string& force_node,
                         store::TraceWriter& w, store::StringPool& strings, size_t* events,
                         store::SessionEnd& last) {
  auto reader = store::TraceReader::open(in, builtin_views());
  if (!reader) return reader.error();
  store::Db& db = (*reader)->db();
  if (auto s = refuse_folded_launches(db, in); !s) return s;
  // The original implementation stored a runtime call and the driver call inside it as two;
  // they are merged as ours records them, as one (store/legacy_views.h): said, not hidden.
  if (int64_t n = (*reader)->legacy_nested_calls())
    std::cerr << "ingero merge: " << in << ": " << n << store::folded_calls_words(n)
              << " (nested_calls), as ingero records them\n";
  auto nodes = input_nodes(db, in, force_node);
  if (!nodes) return nodes.error();
  auto first = store::first_event_ns(db);
  if (!first) return first.error();
  for (const InputNode& n : *nodes)
    if (auto s =
            merge_node(**reader, in, n, force_node, first->value_or(0), w, strings, events, last);
        !s)
      return s;
  if (auto s = carry_rows(db, w, {"cgroup_metadata"}, std::nullopt, std::nullopt, ""); !s) return s;
  if (auto s = merge_stacks(db, w); !s) return s;
  return w.commit();
}

}  // namespace

ingero::Status merge_traces(const std::vector<std::string>& inputs, const std::string& force_node,
                            const std::string& tmp, size_t* events) {
  {
    auto w = store::TraceWriter::open(tmp, builtin_views());
    if (!w) return w.error();
    // Every call keeps its row; folded once the whole is written, each launch op by its
    // node's processes' limits over the whole file (as `compact` folds a --keep-all trace).
    (*w)->set_folding(false);
    store::StringPool strings;
    store::SessionEnd end;
    for (const auto& in : inputs)
      if (auto s = merge_one(in, force_node, **w, strings, events, end); !s)
        return ingero::make_error(file_error(in, s.error().message));
    if (auto s = (*w)->finish(end); !s) return s;
  }
  auto db = store::Db::open(tmp, store::Db::Mode::kReadWrite);
  if (!db) return db.error();
  if (auto f = store::fold_unfolded(**db); !f) return f.error();
  return {};
}

// Refused before anything is written: a session in two inputs (a file given twice, a copy,
// or a file beside a merged file that holds it) would count every call of it twice.
ingero::Status refuse_sessions_twice(const std::vector<std::string>& inputs,
                                     const std::string& force_node, size_t* sessions) {
  std::map<store::SessionIdentity, size_t> first_in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto reader = store::TraceReader::open(inputs[i], builtin_views());
    if (!reader) return reader.error();
    // A damaged page (an index, `sources`, `ops`) dropped rows without an error: a merge of
    // 13,067 events wrote 5,925, and one with a damaged `sources` page wrote none, exit 0.
    if (auto st = store::check_intact((*reader)->db()); !st) return st;
    auto nodes = input_nodes((*reader)->db(), inputs[i], force_node);
    if (!nodes) return ingero::make_error(file_error(inputs[i], nodes.error().message));
    for (const auto& n : *nodes) {
      auto ids = node_sessions((*reader)->db(), n, force_node);
      if (!ids) return ingero::make_error(file_error(inputs[i], ids.error().message));
      for (const auto& id : *ids) {
        auto [it, fresh] = first_in.try_emplace(id, i);
        if (fresh || it->second == i) continue;
        return ingero::make_error(
            inputs[i] + ": the session of node " + id.node + " started at " +
            engine::format_wall(id.started_at_ns) + " (" + std::to_string(id.started_at_ns) +
            (id.host.empty() ? "" : ", host " + id.host) + ") is also in " + inputs[it->second] +
            ": merging both would count its calls twice. Merge tells sessions apart by node, "
            "start and host, and refuses one twice: leave one of the two files out (a merged "
            "file holds every session of the files merged into it)");
      }
    }
  }
  *sessions = first_in.size();
  return {};
}

ingero::Status convert_trace(const std::string& given) {
  // Through a symbolic link, the file it names is converted beside itself: renamed over the
  // link, the copy replaced the link and left the file it named unconverted.
  std::error_code ec;
  const std::string path = std::filesystem::canonical(given, ec).string();
  if (ec) return ingero::Error::sys("reading " + given, ec.value());
  struct stat was {};
  if (::stat(path.c_str(), &was) != 0) return ingero::Error::sys("reading " + path, errno);
  // A signal that ends the process meanwhile (Ctrl-C, a service stop) removes the copy, its
  // SQLite files and the folder, and says the file was left as it was: it left them all.
  auto dir = PrivateTraceDir::make(path, "converting", "converted.db",
                                   "ingero compact: interrupted: converting " + path +
                                       " was abandoned and its copy removed; the file is as it "
                                       "was\n");
  if (!dir) return dir.error();
  const std::string tmp = (*dir)->file();
  size_t events = 0;
  auto s = merge_traces({path}, "", tmp, &events);
  // The file keeps its mode and owner: the new one was made 0600 by whoever ran compact, and a
  // trace others were given to read became theirs no longer. An owner is kept where we may
  // (root); a mode always.
  if (s && ::chmod(tmp.c_str(), was.st_mode & 07777) != 0)
    s = ingero::Error::sys("giving the converted copy the file's mode", errno);
  if (s && (was.st_uid != ::geteuid() || was.st_gid != ::getegid()))
    (void)::chown(tmp.c_str(), was.st_uid, was.st_gid);
  if (s) (*dir)->quiet();  // from the rename on, the file may be the converted one
  if (s && ::rename(tmp.c_str(), path.c_str()) != 0)
    s = ingero::Error::sys("renaming the converted copy over " + path, errno);
  dir->reset();
  if (!s) {
    // The copy lived in a private folder now gone: said as what it was, not by its name.
    std::string m = s.error().message;
    for (size_t at; (at = m.find(tmp + ": ")) != std::string::npos;) m.erase(at, tmp.size() + 2);
    for (size_t at; (at = m.find(tmp)) != std::string::npos;)
      m.replace(at, tmp.size(), "the converted copy");
    const std::string removed = " (the new file was removed)";
    if (m.size() >= removed.size() &&
        m.compare(m.size() - removed.size(), removed.size(), removed) == 0)
      m.resize(m.size() - removed.size());
    return ingero::make_error("converting to schema " + std::to_string(store::kSchemaVersion) +
                              ": " + m);
  }
  return {};
}

}  // namespace ingero::app
