#include "tests/support/trace_db.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "app/builtin_backends.h"
#include "store/trace_reader.h"
#include "test_paths.h"

namespace ingero::test {

std::vector<std::vector<std::string>> query_rows(const std::string& db, const std::string& sql) {
  std::vector<std::vector<std::string>> out;
  // As `ingero query` opens it: with the builtin backends' views.
  auto r = store::TraceReader::open(db, app::builtin_views());
  if (!r) {
    ADD_FAILURE() << r.error().message;
    return out;
  }
  store::QueryLimits lim;
  lim.max_rows = 1000000;
  auto res = store::run_query(**r, sql, lim);
  if (!res) {
    ADD_FAILURE() << sql << ": " << res.error().message;
    return out;
  }
  for (const auto& row : res->rows) {
    std::vector<std::string> cells;
    for (const auto& v : row) {
      if (std::holds_alternative<std::monostate>(v))
        cells.push_back("NULL");
      else if (auto* i = std::get_if<int64_t>(&v))
        cells.push_back(std::to_string(*i));
      else if (auto* d = std::get_if<double>(&v))
        cells.push_back(std::to_string(*d));
      else
        cells.push_back(std::get<std::string>(v));
    }
    out.push_back(std::move(cells));
  }
  return out;
}

int64_t query_int(const std::string& db, const std::string& sql) {
  auto rows = query_rows(db, sql);
  if (rows.empty() || rows[0].empty() || rows[0][0] == "NULL") return -1;
  return std::stoll(rows[0][0]);
}

namespace {

std::vector<std::string> trace_argv(std::vector<std::string> argv, const std::string& db,
                                    const std::vector<std::string>& command,
                                    const std::vector<std::string>& extra) {
  argv.insert(argv.end(), {INGERO_BIN, "trace", "--no-live", "--db", db});
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

TraceRun run_trace(std::vector<std::string> argv, const std::string& db,
                   const std::vector<std::string>& command, const std::vector<std::string>& extra,
                   const std::vector<std::string>& env) {
  argv = trace_argv(std::move(argv), db, command, extra);
  TraceRun r;
  r.rc = run_command(argv, &r.out, &r.err, env, std::chrono::seconds(180));
  return r;
}

}  // namespace

TraceRun trace_command(const std::string& db, const std::vector<std::string>& command,
                       const std::vector<std::string>& extra, const std::vector<std::string>& env) {
  return run_trace({}, db, command, extra, env);
}

TraceRun trace_command_on_cpu0(const std::string& db, const std::vector<std::string>& command,
                               const std::vector<std::string>& extra,
                               const std::vector<std::string>& env) {
  return run_trace({"taskset", "-c", "0"}, db, command, extra, env);
}

Subprocess spawn_trace(const std::string& db, const std::vector<std::string>& command,
                       const std::vector<std::string>& extra, const std::vector<std::string>& env) {
  return Subprocess::spawn(trace_argv({}, db, command, extra), env);
}

Subprocess spawn_trace_on_cpu0(const std::string& db, const std::vector<std::string>& command,
                               const std::vector<std::string>& extra,
                               const std::vector<std::string>& env) {
  return Subprocess::spawn(trace_argv({"taskset", "-c", "0"}, db, command, extra), env);
}

hal::Event runtime_call(uint64_t ts_ns, uint64_t dur_ns, uint32_t pid, uint32_t tid,
                        hal::EventKind kind, std::string_view op) {
  hal::Event e;
  e.ts_ns = ts_ns;
  e.dur_ns = dur_ns;
  e.pid = pid;
  e.tid = tid;
  e.set_comm("trainer");
  e.vendor = "nvidia";
  e.api = "cuda_runtime";
  e.kind = kind;
  e.op = op;
  e.has_ret = true;
  return e;
}

namespace {

bool scratch_made = false;

std::string test_dir_name(const ::testing::TestInfo& info) {
  return std::string(info.test_suite_name()) + "." + info.name();
}

// A passed test's files go; a failed test's stay for whoever reads the failure.
class ScratchCleaner : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!scratch_made || !info.result()->Passed()) return;
    std::error_code ec;
    std::filesystem::remove_all(scratch_root() + "/" + test_dir_name(info), ec);
  }
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    if (!scratch_made || !unit.Passed()) return;
    std::error_code ec;
    std::filesystem::remove_all(scratch_root(), ec);
  }
};

const bool cleaner_registered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new ScratchCleaner);
  return true;
}();

}  // namespace

std::string scratch_root() {
  static const std::string root = [] {
    (void)cleaner_registered;
    std::string r = "/tmp/ingero-tests/" + std::to_string(getpid());
    // Whatever is there was left by an earlier process that had this pid: in a fresh
    // container, pids repeat from run to run, and /tmp may outlive the run.
    std::error_code ec;
    std::filesystem::remove_all(r, ec);
    std::filesystem::create_directories(r);
    scratch_made = true;
    return r;
  }();
  return root;
}

int line_of(const std::string& path, const std::string& needle) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (++n && line.find(needle) != std::string::npos) return n;
  return 0;
}

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = scratch_root() + "/" + (info ? test_dir_name(*info) : "x");
  std::filesystem::create_directories(dir);
  std::string p = dir + "/" + name;
  std::filesystem::remove_all(p);
  return p;
}

bool unpack_fixture(const std::string& rel, const std::string& out) {
  std::string cmd = "xz -dc '" INGERO_FIXTURES_DIR "/" + rel + ".db.xz' > '" + out + "'";
  return std::system(cmd.c_str()) == 0;
}

std::string sha256_file(const std::string& path) {
  std::string out;
  run_command({"/usr/bin/sha256sum", path}, &out);
  return out.substr(0, 64);
}

std::string ingero_binary_for_nobody() {
  static const std::string bin = [] {
    std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "--",      INGERO_BIN,      "version"};
    if (run_command(argv) == 0) return std::string(INGERO_BIN);
    std::string copy = scratch_root() + "/ingero-for-nobody";
    std::filesystem::copy_file(INGERO_BIN, copy, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(copy, std::filesystem::perms(0755));
    return copy;
  }();
  return bin;
}

bool running_in_ci() {
  const char* ci = getenv("CI");
  return ci && std::string(ci) == "true";
}

bool bpf_available(std::string* why) {
  static int cached = -1;
  static std::string reason;
  if (cached < 0) {
    if (geteuid() != 0) {
      cached = 0;
      reason = "not running as root";
    } else {
      std::string out;
      int rc = run_command({INGERO_BIN, "check", "--json", "--backends", "cuda"}, &out);
      try {
        auto j = nlohmann::json::parse(out);
        cached = j.value("can_trace", false) ? 1 : 0;
        if (!cached) {
          for (auto& c : j["checks"])
            if (c["status"] == "fail")
              reason += c["name"].get<std::string>() + ": " + c["detail"].get<std::string>() + "; ";
        }
      } catch (...) {
        cached = 0;
        reason = "ingero check failed (rc " + std::to_string(rc) + ")";
      }
    }
  }
  if (why) *why = reason;
  return cached == 1;
}

}  // namespace ingero::test
