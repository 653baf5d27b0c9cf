// CPython frame support without BPF: the line tables decoded exactly as the interpreter itself
// reports lines, the layout table recompiled against each interpreter's own headers, and the
// 3.13 debug offsets. Debian's python3 (3.11) is required under CI; other versions found on
// the host (pyenv) are checked too, and skipped loudly when absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "probe/python.h"
#include "test_paths.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::hal {
namespace {

struct Interpreter {
  std::string python, include;  // binary, header dir ("" if none)
  int minor;
};

std::vector<Interpreter> interpreters() {
  std::vector<Interpreter> v;
  if (access("/usr/bin/python3.11", X_OK) == 0)
    v.push_back({"/usr/bin/python3.11", "/usr/include/python3.11", 11});
  for (const auto& [ver, minor] : std::vector<std::pair<std::string, int>>{
           {"3.10.13", 10}, {"3.11.7", 11}, {"3.12.1", 12}, {"3.13.0", 13}}) {
    std::string root = "/root/.pyenv/versions/" + ver;
    std::string bin = root + "/bin/python3." + std::to_string(minor);
    if (access(bin.c_str(), X_OK) == 0)
      v.push_back({bin, root + "/include/python3." + std::to_string(minor), minor});
  }
  return v;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out += char(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

// For every code object of a sample module: its line table and, per instruction byte offset,
// the line the interpreter reports (co_lines, which is what tracebacks use).
const char* kDumper = R"PY(
import json, sys, types
src = '''
def f(a, b):
    x = a + b
    if x > 3:
        y = [i * 2 for i in range(x)]
    else:
        y = None
    for k in range(3):
        x += k
        try:
            z = 1 / (k - 1)
        except ZeroDivisionError:
            z = 0
    return (x,
            y,
            z)

class C:
    def m(self):
        return f(1,
                 2)
''' + "\n" * 300 + "def far():\n    return 7\n"
code = compile(src, "sample.py", "exec")
out = []
def walk(c):
    lines = {}
    for start, end, line in c.co_lines():
        for off in range(start, end, 2):
            lines[off] = line if line is not None else 0
    out.append({"name": c.co_name, "first": c.co_firstlineno,
                "table": c.co_linetable.hex(), "lines": lines})
    for k in c.co_consts:
        if isinstance(k, types.CodeType):
            walk(k)
walk(code)
print(json.dumps(out))
)PY";

TEST(PythonLines, DecodedExactlyAsEachInterpreterReportsThem) {
  auto ins = interpreters();
  if (ins.empty()) {
    if (test::running_in_ci()) FAIL() << "CI=true but /usr/bin/python3.11 is missing";
    GTEST_SKIP() << "*** SKIPPED: no CPython 3.10+ interpreter on this host ***";
  }
  std::string script = test::temp_path("dump.py");
  std::ofstream(script) << kDumper;
  for (const auto& in : ins) {
    std::string out, err;
    ASSERT_EQ(test::run_command({in.python, script}, &out, &err), 0) << in.python << err;
    auto codes = nlohmann::json::parse(out);
    size_t checked = 0;
    for (const auto& c : codes) {
      std::string table = unhex(c["table"]);
      int first = c["first"];
      for (auto it = c["lines"].begin(); it != c["lines"].end(); ++it) {
        uint64_t off = std::stoull(it.key());
        int want = it.value();
        int got = in.minor >= 11 ? python_line_location_table(table, first, off)
                                 : python_line_310(table, first, off);
        EXPECT_EQ(got, want) << in.python << " " << c["name"] << " offset " << off;
        ++checked;
      }
    }
    EXPECT_GT(checked, 50u) << in.python;
  }
}

TEST(PythonLines, MalformedTablesGiveNoLineNotGarbage) {
  EXPECT_EQ(python_line_location_table("", 10, 0), 0);
  EXPECT_EQ(python_line_location_table(std::string("\x01\x02\x03", 3), 10, 0),
            0);                                                             // no entry start
  EXPECT_EQ(python_line_location_table(std::string("\xf0", 1), 10, 4), 0);  // truncated varint
  EXPECT_EQ(python_line_310(std::string("\x02", 1), 5, 0), 0);
  EXPECT_EQ(python_line_310(std::string("\x04\x80", 2), 5, 0), 0);  // -128: no line
  EXPECT_EQ(python_line_310(std::string("\x04\x01\x06\x02", 4), 5, 6), 8);
}

// The offsets of the table, recompiled against each interpreter's internal headers.
const char* kOffsets = R"C(
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030b0000
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#else
#include "frameobject.h"
#endif
#define P(n, e) printf("%s %zu\n", n, (size_t)(e))
int main(void) {
  P("runtime_interp_head", offsetof(_PyRuntimeState, interpreters.head));
#if PY_VERSION_HEX >= 0x030b0000
  P("interp_threads_head", offsetof(PyInterpreterState, threads.head));
  P("tstate_thread_id", offsetof(PyThreadState, native_thread_id));
  P("tstate_frame", offsetof(PyThreadState, cframe));
  P("cframe_current_frame", offsetof(_PyCFrame, current_frame));
  P("frame_code", offsetof(_PyInterpreterFrame, f_code));
  P("frame_previous", offsetof(_PyInterpreterFrame, previous));
  P("frame_instr", offsetof(_PyInterpreterFrame, prev_instr));
  P("frame_owner", offsetof(_PyInterpreterFrame, owner));
  P("code_qualname", offsetof(PyCodeObject, co_qualname));
  P("code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#else
  P("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
  P("tstate_thread_id", offsetof(PyThreadState, thread_id));
  P("tstate_frame", offsetof(PyThreadState, frame));
  P("frame_code", offsetof(PyFrameObject, f_code));
  P("frame_previous", offsetof(PyFrameObject, f_back));
  P("frame_instr", offsetof(PyFrameObject, f_lasti));
#endif
#if PY_VERSION_HEX >= 0x030b0000 && PY_VERSION_HEX < 0x030c0000
  P("frame_is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
  P("tstate_next", offsetof(PyThreadState, next));
  P("tstate_interp", offsetof(PyThreadState, interp));
  P("code_filename", offsetof(PyCodeObject, co_filename));
  P("code_name", offsetof(PyCodeObject, co_name));
  P("code_firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("code_linetable", offsetof(PyCodeObject, co_linetable));
  P("ascii_size", sizeof(PyASCIIObject));
  P("compact_size", sizeof(PyCompactUnicodeObject));
  return 0;
}
)C";

TEST(PythonLayout, TableMatchesEachInterpretersHeaders) {
  size_t checked = 0;
  std::string src = test::temp_path("offsets.c");
  std::ofstream(src) << kOffsets;
  for (const auto& in : interpreters()) {
    if (in.minor > 12 || !std::filesystem::exists(in.include + "/internal/pycore_runtime.h"))
      continue;
    std::string exe =
        test::temp_path("offsets_" + std::to_string(in.minor) + "_" + std::to_string(checked));
    std::string out, err;
    ASSERT_EQ(
        test::run_command(
            {"cc", "-I" + in.include, "-I" + in.include + "/internal", src, "-o", exe}, &out, &err),
        0)
        << err;
    ASSERT_EQ(test::run_command({exe}, &out, &err), 0);
    auto l = python_layout(3, in.minor);
    ASSERT_TRUE(l) << in.minor;
    std::map<std::string, uint32_t> ours = {{"runtime_interp_head", l->runtime_interp_head},
                                            {"interp_threads_head", l->interp_threads_head},
                                            {"tstate_thread_id", l->tstate_thread_id},
                                            {"tstate_frame", l->tstate_frame},
                                            {"frame_code", l->frame_code},
                                            {"frame_previous", l->frame_previous},
                                            {"frame_instr", l->frame_instr},
                                            {"tstate_next", l->tstate_next},
                                            {"tstate_interp", l->tstate_interp},
                                            {"code_filename", l->code_filename},
                                            {"code_name", l->code_name},
                                            {"code_firstlineno", l->code_firstlineno},
                                            {"code_linetable", l->code_linetable},
                                            {"ascii_size", l->ascii_size},
                                            {"compact_size", l->compact_size},
                                            {"cframe_current_frame", l->cframe_current_frame},
                                            {"frame_owner", l->frame_owner},
                                            {"code_qualname", l->code_qualname},
                                            {"code_adaptive", l->code_adaptive},
                                            {"frame_is_entry", l->frame_is_entry}};
    std::istringstream in_s(out);
    std::string name;
    uint32_t value;
    size_t n = 0;
    while (in_s >> name >> value) {
      EXPECT_EQ(ours.at(name), value)
          << "Python 3." << in.minor << " " << name << " (" << in.include << ")";
      ++n;
    }
    EXPECT_GE(n, 15u);
    ++checked;
  }
  if (!checked) {
    if (test::running_in_ci())
      FAIL() << "CI=true but no CPython headers (apt-get install python3-dev)";
    GTEST_SKIP() << "*** SKIPPED: no CPython internal headers on this host ***";
  }
}

TEST(PythonLayout, UnknownVersionsAndBadDebugOffsetsAreRefused) {
  EXPECT_FALSE(python_layout(3, 9));
  EXPECT_FALSE(python_layout(3, 14));
  EXPECT_FALSE(python_layout(2, 7));
  std::vector<uint8_t> buf(600, 0);
  EXPECT_FALSE(python_layout_from_debug_offsets(buf.data(), buf.size()));  // no cookie
  std::memcpy(buf.data(), "xdebugpy", 8);
  uint64_t v314 = 0x030e00f0;
  std::memcpy(buf.data() + 8, &v314, 8);
  auto r = python_layout_from_debug_offsets(buf.data(), buf.size());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("only the 3.13 layout"), std::string::npos);
  EXPECT_FALSE(python_layout_from_debug_offsets(buf.data(), 100));  // short
}

TEST(PythonProcess, ANonPythonProcessIsNotPython) {
  std::ifstream f("/proc/self/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  auto p = PythonProcess::inspect(getpid(), parse_proc_maps(ss.str()));
  ASSERT_TRUE(p);
  EXPECT_FALSE(*p);
}

// The stand-in "python3.11" with its thread state pointing at another interpreter (a build
// whose struct layout differs from CPython's) is refused with a message that says so; the
// same binary with the chain intact is accepted and verified, and with the chain half-built
// is accepted unverified.
TEST(PythonProcess, AnInterpreterWhoseLayoutDoesNotCheckOutIsRefused) {
  if (geteuid() != 0)
    GTEST_SKIP() << "*** SKIPPED: reading another process's memory needs root ***";
  auto l = python_layout(3, 11);
  ASSERT_TRUE(l);
  auto run = [&](const char* mode) {
    auto fake = test::Subprocess::spawn(
        {INGERO_FAKE_PYTHON, mode, std::to_string(l->runtime_interp_head),
         std::to_string(l->interp_threads_head), std::to_string(l->tstate_interp)});
    EXPECT_TRUE(fake.wait_stdout_line("ready", std::chrono::seconds(10))) << fake.err();
    std::ifstream f("/proc/" + std::to_string(fake.pid()) + "/maps");
    std::stringstream ss;
    ss << f.rdbuf();
    auto p = PythonProcess::inspect(fake.pid(), parse_proc_maps(ss.str()));
    fake.close_stdin();
    EXPECT_EQ(fake.wait(), 0);
    return p;
  };
  auto patched = run("patched");
  ASSERT_FALSE(patched);
  EXPECT_NE(patched.error().message.find(std::string(INGERO_FAKE_PYTHON) +
                                         " (Python 3.11): the "
                                         "thread list does not lead back to the interpreter"),
            std::string::npos)
      << patched.error().message;
  EXPECT_NE(patched.error().message.find("Python frames are off for pid"), std::string::npos);
  auto clean = run("clean");
  ASSERT_TRUE(clean) << clean.error().message;
  ASSERT_TRUE(*clean);
  EXPECT_TRUE((*clean)->verified());
  EXPECT_EQ((*clean)->layout().version(), "3.11");
  EXPECT_EQ((*clean)->interpreter(), INGERO_FAKE_PYTHON);
  // Its thread state not yet pointing at any interpreter: found, not verified, not refused
  // (the collector inspects it again when the process next changes).
  auto linking = run("linking");
  ASSERT_TRUE(linking) << linking.error().message;
  ASSERT_TRUE(*linking);
  EXPECT_FALSE((*linking)->verified());
}

TEST(PythonProcess, ALivePython311IsFoundVerifiedAndResolvesItsOwnFrame) {
  if (access("/usr/bin/python3.11", X_OK) != 0) {
    if (test::running_in_ci()) FAIL() << "CI=true but /usr/bin/python3.11 is missing";
    GTEST_SKIP() << "*** SKIPPED: no /usr/bin/python3.11 ***";
  }
  if (geteuid() != 0)
    GTEST_SKIP() << "*** SKIPPED: reading another process's memory needs root ***";
  auto py = test::Subprocess::spawn(
      {"/usr/bin/python3.11", "-c",
       "import sys, time\nprint('ready', flush=True)\nsys.stdin.readline()\n"});
  ASSERT_TRUE(py.wait_stdout_line("ready", std::chrono::seconds(10)));
  // "ready" is printed from line 2; the frame reaches line 3 only once the process sits in
  // read(2) (syscall number 0 in /proc/PID/syscall), so wait for that rather than racing it.
  bool in_read = false;
  for (int i = 0; i < 1000 && !in_read; ++i) {
    std::ifstream sc("/proc/" + std::to_string(py.pid()) + "/syscall");
    std::string nr;
    sc >> nr;
    in_read = nr == "0";
    if (!in_read) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(in_read) << "python3.11 never blocked in read(2)";
  std::ifstream f("/proc/" + std::to_string(py.pid()) + "/maps");
  std::stringstream ss;
  ss << f.rdbuf();
  auto p = PythonProcess::inspect(py.pid(), parse_proc_maps(ss.str()));
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_TRUE(*p);
  EXPECT_EQ((*p)->layout().version(), "3.11");
  EXPECT_TRUE((*p)->verified());
  EXPECT_EQ((*p)->interpreter(), "/usr/bin/python3.11");
  // Walk to the current frame the way BPF does and resolve it: <string> line 3 (readline).
  ProcessMemory mem(py.pid());
  const PyLayout& l = (*p)->layout();
  auto interp = mem.u64((*p)->runtime() + l.runtime_interp_head);
  auto ts = mem.u64(*interp + l.interp_threads_head);
  auto cframe = mem.u64(*ts + l.tstate_frame);
  auto frame = mem.u64(*cframe + l.cframe_current_frame);
  ASSERT_TRUE(frame && *frame);
  auto code = mem.u64(*frame + l.frame_code);
  auto instr = mem.u64(*frame + l.frame_instr);
  auto info = (*p)->resolve(*code, *instr);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->file, "<string>");
  EXPECT_EQ(info->function, "<module>");
  EXPECT_EQ(info->line, 3);
  // A pointer that is not a code object is refused, never turned into a frame.
  EXPECT_FALSE((*p)->resolve(*ts, 0));
  EXPECT_EQ((*p)->invalid_frames(), 1u);
  py.close_stdin();
  py.wait();
}

}  // namespace
}  // namespace ingero::hal
