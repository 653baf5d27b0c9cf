// `ingero merge a.db b.db ... -o out.db` (app/merge_traces.h does the merge).
#include <fcntl.h>
#include <stdio.h>

#include <filesystem>
#include <iostream>

#include "app/commands.h"
#include "app/merge_traces.h"
#include "app/output_file.h"
#include "app/temp_files.h"

namespace ingero::app {

void add_merge_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "merge",
      "Merge per-node trace files (ours and the original implementation's) into one file with\n"
      "a node column: `ingero merge node-01.db node-02.db -o cluster.db`. Inputs are read-only.\n"
      "Files that carry no node name (schema 0.8) take --force-node or their file name.\n"
      "Sessions are told apart by node, start and host: a session given twice (a copy, or a\n"
      "merged file with one of its inputs) is refused, never counted twice.");
  struct Opts {
    std::vector<std::string> inputs;
    std::string out, force_node;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("inputs", o->inputs, "Trace files to merge")->required();
  cmd->add_option("-o,--out,--output", o->out, "Merged trace file to create")->required();
  cmd->add_option("--force-node", o->force_node, "Node name for every event of every input");
  cmd->callback([&ctx, o] {
    // Merged whole, then refused at the rename ("renaming ... to : No such file").
    if (o->out.empty()) {
      std::cerr << "ingero merge: -o is empty: name the merged trace file to create\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    auto there = name_taken(o->out);
    if (!there) {  // a link loop, a name past 255 bytes: said, not thrown (it aborted)
      std::cerr << "ingero merge: " << o->out << ": " << there.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    if (*there) {
      std::cerr << "ingero merge: " << o->out << " exists; merge into a new file\n";
      ctx.exit_code = kExitUsage;
      return;
    }
    size_t sessions = 0;
    if (auto st = refuse_sessions_twice(o->inputs, o->force_node, &sessions); !st) {
      std::cerr << "ingero merge: " << st.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    // Written in a private folder beside the output and renamed over it at the end: a merge
    // that fails, or a signal ends, leaves no partial file behind, and no one else can plant a
    // link where the merge writes (a fixed temporary name could be one).
    auto dir = PrivateTraceDir::make(
        o->out, "merging", "merged.db",
        "ingero merge: interrupted: " + o->out + " was not written, its partial copy removed\n");
    if (!dir) {
      std::cerr << "ingero merge: " << dir.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    const std::string tmp = (*dir)->file();
    size_t events = 0;
    auto s = merge_traces(o->inputs, o->force_node, tmp, &events);
    if (s) s = clear_sqlite_sides(o->out);  // a stray -wal would be read as the new file's
    if (s) (*dir)->quiet();
    // RENAME_NOREPLACE: a file that appeared at the output meanwhile is not overwritten.
    if (s && renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, o->out.c_str(), RENAME_NOREPLACE) != 0)
      s = ingero::Error::sys("renaming " + tmp + " to " + o->out, errno);
    dir->reset();
    if (!s) {
      std::cerr << "ingero merge: " << s.error().message << "\n";
      ctx.exit_code = kExitFailure;
      return;
    }
    std::cerr << "ingero merge: " << events << " events of " << sessions << " session"
              << (sessions == 1 ? "" : "s") << " from " << o->inputs.size() << " file"
              << (o->inputs.size() == 1 ? "" : "s") << " into " << o->out
              << " (sessions told apart by node, start and host: none twice)\n";
    ctx.exit_code = kExitOk;
  });
}

}  // namespace ingero::app
