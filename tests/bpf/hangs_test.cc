// Calls in flight, live (issue 40): processes hung in the stand-in runtime's sync, which blocks
// reading a pipe (INGERO_FAKE_SYNC_FD=0: the test holds its stdin), traced by `ingero trace
// --inflight-after 3s`. While they hang: a row in `inflight` within 2 x --inflight-after of the
// call's entry, with the arguments and the stack (wait_for_device at its line, then main),
// `ingero status` naming the process, op, seconds and line, and the Prometheus gauges set. Then
// one call returns (its row ends `returned`, the call is an ordinary one), one process is
// killed inside it (`unfinished`), and one still hangs when the tracer stops (`stopped`).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "test_paths.h"
#include "tests/support/http_client.h"
#include "tests/support/run_ingero.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> kFakeEnv = {"VIRTUAL_ENV=" INGERO_FAKE_VENV,
                                           "CUDA_HOME=" INGERO_FAKE_CUDA_HOME};

std::string pid_of(Subprocess& p) {
  std::string line;
  if (!p.wait_stdout_line("pid ", seconds(20), &line)) return "";
  return line.substr(4);
}

// Polls `sql` until it returns a row (the tracer commits every flush interval); empty after
// `limit`.
std::vector<std::vector<std::string>> poll_rows(const std::string& db, const std::string& sql,
                                                seconds limit = seconds(60)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    auto rows = query_rows(db, sql);
    if (!rows.empty()) return rows;
    std::this_thread::sleep_for(milliseconds(200));
  }
  return {};
}

std::string metric(const std::string& exposition, const std::string& name) {
  std::regex re("(^|\\n)" + name + " ([^\\n]+)");
  std::smatch m;
  return std::regex_search(exposition, m, re) ? m[2].str() : "";
}

// `lookups`: the tracer reads the calls in flight from the thread table, as where the kernel
// refuses the map-element iterator (probe/inflight_table.h), not through the iterator.
void hung_sync_run(bool lookups) {
  std::string db = temp_path(lookups ? "hung-lookups.db" : "hung.db");
  int port = free_tcp_port();
  std::vector<std::string> env = kFakeEnv;
  std::vector<std::string> tracer_env = env;
  if (lookups) tracer_env.push_back("INGERO_NO_MAP_ITER=1");
  auto tracer = Subprocess::spawn({INGERO_BIN, "trace", "--no-live", "--db", db, "--inflight-after",
                                   "3s", "--prometheus", "127.0.0.1:" + std::to_string(port)},
                                  tracer_env);
  ASSERT_TRUE(tracer.wait_stderr_line("tracing", seconds(60))) << tracer.err();
  // The look-ups are said once, at the start (with the iterator, where the kernel refuses it too).
  if (lookups) {
    EXPECT_NE(tracer.err().find("ingero: this kernel refused the BPF map-element iterator: calls "
                                "in flight are read by looking each traced thread up, a copy of "
                                "its whole state a second\n"),
              std::string::npos)
        << tracer.err();
  }
  env.push_back("INGERO_FAKE_SYNC_FD=0");
  // Three processes hang in the sync: A is released, B killed, C left when the tracer stops.
  auto a = Subprocess::spawn({INGERO_HANG_SYNC, INGERO_FAKE_CUDART}, env);
  auto b = Subprocess::spawn({INGERO_HANG_SYNC, INGERO_FAKE_CUDART}, env);
  auto c = Subprocess::spawn({INGERO_HANG_SYNC, INGERO_FAKE_CUDART}, env);
  std::string pa = pid_of(a), pb = pid_of(b), pc = pid_of(c);
  ASSERT_FALSE(pa.empty() || pb.empty() || pc.empty());
  ASSERT_TRUE(a.wait_stdout_line("entering", seconds(20)));
  ASSERT_TRUE(b.wait_stdout_line("entering", seconds(20)));
  ASSERT_TRUE(c.wait_stdout_line("entering", seconds(20)));

  // A's row: in flight, reported within 2 x 3 s of its entry (the trace's own clock), with the
  // sync's stream and the stack it was called from.
  auto rows = poll_rows(db,
                        "SELECT what, status, op, kind, tid, stream, reported_at - entered_at "
                        "BETWEEN 3000000000 AND 6000000000, stack_hash != 0, thread_state "
                        "FROM inflight WHERE pid = " +
                            pa);
  ASSERT_EQ(rows.size(), 1u) << tracer.err();
  EXPECT_EQ(rows[0], (std::vector<std::string>{"call", "in_flight", "cudaStreamSynchronize", "sync",
                                               pa, std::to_string(0xabc), "1", "1", "sleeping"}));
  int call_line = line_of(INGERO_HANG_SYNC_SRC, "// HUNG_SYNC_CALL");
  int main_line = line_of(INGERO_HANG_SYNC_SRC, "// HUNG_SYNC_MAIN");
  auto frames = query_rows(db,
                           "SELECT function, file, line FROM stacks WHERE stack_id = (SELECT "
                           "stack_hash FROM inflight WHERE pid = " +
                               pa + ") ORDER BY frame LIMIT 2");
  EXPECT_EQ(frames, (std::vector<std::vector<std::string>>{
                        {"wait_for_device", INGERO_HANG_SYNC_SRC, std::to_string(call_line)},
                        {"main", INGERO_HANG_SYNC_SRC, std::to_string(main_line)}}));

  // `ingero status` while the tracer writes: process, op, seconds, line; the other thread.
  poll_rows(db, "SELECT 1 FROM inflight WHERE pid = " + pc);
  auto st = run_ingero({"status", "--db", db});
  ASSERT_EQ(st.rc, 0) << st.err;
  EXPECT_NE(st.out.find(db + ": being traced now (calls in flight longer than 3.0 s are reported)"),
            std::string::npos)
      << st.out;
  for (const std::string& p : {pa, pb, pc}) {
    std::regex line("hang_sync \\(pid " + p +
                    "\\) has been inside `cudaStreamSynchronize` for [0-9.]+ s at "
                    "wait_for_device at hang_sync\\.c:" +
                    std::to_string(call_line) +
                    " \\(asleep\\); its other thread is asleep\\n    args: stream=0xabc\\n");
    EXPECT_TRUE(std::regex_search(st.out, line)) << p << "\n" << st.out;
  }

  // Prometheus: three calls in flight, the oldest for 3 s at least.
  auto m = http_get("127.0.0.1", port, "/metrics");
  EXPECT_EQ(metric(m.body, "ingero_inflight_calls"), "3") << m.body;
  EXPECT_GE(std::stod(metric(m.body, "ingero_inflight_oldest_seconds").empty()
                          ? "0"
                          : metric(m.body, "ingero_inflight_oldest_seconds")),
            3.0);

  // A returns: its row ends `returned`, and the sync is an ordinary call with its return code.
  a.write_stdin("x");
  ASSERT_TRUE(a.wait_stdout_line("returned 0", seconds(20)));
  ASSERT_EQ(a.wait(), 0);
  EXPECT_EQ(poll_rows(db, "SELECT status, ended_at > entered_at FROM inflight WHERE pid = " + pa +
                              " AND status != 'in_flight'"),
            (std::vector<std::vector<std::string>>{{"returned", "1"}}));
  EXPECT_EQ(query_rows(db, "SELECT op, status, ret, dur_ns >= 3000000000 FROM calls WHERE pid = " +
                               pa + " AND op = 'cudaStreamSynchronize'"),
            (std::vector<std::vector<std::string>>{{"cudaStreamSynchronize", "ok", "0", "1"}}));
  // B dies inside the call: `unfinished`, as its call is.
  b.signal(SIGKILL);
  b.wait();
  EXPECT_EQ(poll_rows(db, "SELECT status, thread_state FROM inflight WHERE pid = " + pb +
                              " AND status != 'in_flight'"),
            (std::vector<std::vector<std::string>>{{"unfinished", "exited"}}));

  tracer.signal(SIGTERM);
  ASSERT_EQ(tracer.wait(), 0) << tracer.err();
  // C still hangs: `stopped`; one row per call in the file.
  EXPECT_EQ(query_rows(db, "SELECT pid, status FROM inflight ORDER BY pid = " + pa +
                               " DESC, pid = " + pb + " DESC"),
            (std::vector<std::vector<std::string>>{
                {pa, "returned"}, {pb, "unfinished"}, {pc, "stopped"}}));
  EXPECT_EQ(
      query_rows(db, "SELECT status FROM calls WHERE op = 'cudaStreamSynchronize' AND pid = " + pb),
      (std::vector<std::vector<std::string>>{{"unfinished"}}));
  // Without a tracer, status says what was stuck when it stopped.
  auto after = run_ingero({"status", "--db", db});
  ASSERT_EQ(after.rc, 0) << after.err;
  EXPECT_NE(after.out.find("hang_sync (pid " + pc + ") was still inside `cudaStreamSynchronize`"),
            std::string::npos)
      << after.out;
  EXPECT_EQ(after.out.find("(pid " + pa + ")"), std::string::npos) << after.out;
  c.signal(SIGKILL);
  c.wait();
}

TEST(Hangs, HungSyncIsReportedWhileItLastsThenEndsAsItDid) {
  REQUIRE_BPF();
  hung_sync_run(false);
}

// The same, the calls in flight read by looking the threads up: some kernels refuse the
// iterator (Linux 6.18.44 with a BPF LSM policy answered EPERM), and tracing went on without
// hang detection's loss.
TEST(Hangs, HungSyncIsReportedTheSameWhereTheThreadsAreLookedUp) {
  REQUIRE_BPF();
  hung_sync_run(true);
}

}  // namespace
}  // namespace ingero::test
