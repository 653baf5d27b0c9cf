// `ingero report`: one self-contained HTML file (or the model as JSON) from a trace.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "app/builtin_backends.h"
#include "app/commands.h"
#include "app/output_file.h"
#include "app/read_error.h"
#include "app/report_file.h"
#include "app/window_flags.h"
#include "engine/window_spec.h"
#include "hal/memory.h"
#include "serve/report/report_html.h"
#include "serve/report/report_model.h"

namespace ingero::app {

Result<nlohmann::json> build_report_model(const std::string& path, const engine::WindowSpec& spec,
                                          const std::string& title, std::string* miss) {
  auto reader = store::TraceReader::open(path, builtin_views(), builtin_error_codes());
  if (!reader) return reader.error();
  store::SqlTraceSource source(**reader);
  auto w = engine::resolve_window(source, spec);
  if (!w) return w.error();
  if (miss) *miss = engine::window_miss(source, *w, path);
  serve::report::ReportOptions o;
  o.title = title;
  o.window = *w;
  auto model = serve::report::build_report(**reader, source, o);
  if (!model) return make_error(file_error(path, model.error().message));
  if (!source.error().empty()) return make_error(reading_error(path, source.error()));
  return model;
}

namespace {

struct ReportOpts {
  std::string db, out = "ingero-report.html";
  engine::WindowSpec w;
  bool json = false;
};

int run_report(const ReportOpts& o) {
  if (auto st = engine::check_window_spec(o.w); !st) {
    std::cerr << "ingero report: " << st.error().message << "\n";
    return kExitUsage;
  }
  std::string path = o.db.empty() ? default_db_path() : o.db;
  if (auto why = OutputFile::refusal(o.out, true, {path})) {  // a folder, or the trace read
    std::cerr << "ingero report: " << *why << "\n";
    return kExitUsage;
  }
  hal::keep_freed_memory();  // one analysis, then the process exits
  auto t0 = std::chrono::steady_clock::now();
  std::string miss;
  auto model = build_report_model(path, o.w, path, &miss);
  if (!model) {
    std::cerr << "ingero report: " << model.error().message << "\n";
    return kExitFailure;
  }
  if (!miss.empty()) std::cerr << "ingero report: " << miss << "\n";
  std::string text = o.json ? model->dump(1, ' ', false, nlohmann::json::error_handler_t::replace)
                            : serve::report::render_report_html(*model, path);
  if (o.out == "-") {
    std::cout << text << (o.json ? "\n" : "");
    return std::cout.good() ? kExitOk : kExitFailure;
  }
  // A temporary file of its own (mkostemp, mode 0600: the report holds trace data), renamed
  // over the target; never a fixed name another user could have planted a link at.
  auto out = OutputFile::open(o.out, true, {path});
  Status st = out ? (*out)->write(text) : Status(out.error());
  if (st && o.json) st = (*out)->write("\n");
  if (st) st = (*out)->commit();
  if (!st) {
    std::cerr << "ingero report: " << st.error().message << "\n";
    return kExitFailure;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char buf[160];
  std::snprintf(buf, sizeof buf, " (%.1f KiB, %llu calls, %.1f s)", double(text.size()) / 1024,
                static_cast<unsigned long long>((*model)["header"]["calls"].get<uint64_t>()), secs);
  std::cerr << "ingero report: wrote " << std::filesystem::absolute(o.out).string() << buf << "\n";
  return kExitOk;
}

}  // namespace

void add_report_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "report",
      "Write a one-file HTML report of a trace, viewable offline in any browser: header (nodes,\n"
      "span, processes, calls, drops), step timeline with its breakdown (or per-op call rates\n"
      "and latency percentiles), causal chains, a flame graph of the slow calls' stacks, per-op\n"
      "latency histograms, per-process and per-node tables, NCCL collectives per rank.");
  auto o = std::make_shared<ReportOpts>();
  cmd->add_option("--db,-d", o->db,
                  "Trace file, ours or the original implementation's (default ~/.ingero/ingero.db)")
      ->check(path_given());
  cmd->add_option("--output,--out,-o", o->out, "Where to write the report; - for stdout")
      ->capture_default_str()
      ->check(path_given());
  add_window_flags(*cmd, o->w, "Only the last 30s / 5m / 1h of the trace");
  cmd->add_flag("--json", o->json, "Write the report's data model as JSON instead of HTML");
  cmd->callback([&ctx, o] { ctx.exit_code = run_report(*o); });
}

}  // namespace ingero::app
