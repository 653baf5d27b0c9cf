// Native symbolization (libdwfl) and the stack collector, without BPF: a -g program built here,
// this test binary's own functions as a captured stack, deduplication across processes, and
// frames that must not survive (garbage past a broken frame-pointer chain).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "capture/stack_collector.h"
#include "hal/elf_symbols.h"
#include "probe/symbolizer.h"
#include "store/trace_writer.h"
#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

// Outside any namespace, so their symbols are plain.
extern "C" __attribute__((noinline, used)) int ingero_stack_marker_a(int x) {
  asm volatile("" ::: "memory");
  return x + 1;
}
extern "C" __attribute__((noinline, used)) int ingero_stack_marker_b(int x) {
  asm volatile("" ::: "memory");
  return x * 2;
}

namespace ingero::capture {
namespace {

TEST(Symbolizer, FunctionFileAndLineFromDwarf) {
  std::string src = test::temp_path("sym.c");
  std::ofstream(src) << "int helper(int x) { return x + 1; }\n"
                        "\n"
                        "int target_fn(int y)\n"
                        "{\n"
                        "  return helper(y) * 3;\n"
                        "}\n"
                        "int main(void) { return target_fn(1) == 6 ? 0 : 1; }\n";
  std::string exe = test::temp_path("sym");
  std::string out, err;
  ASSERT_EQ(test::run_command({"cc", "-g", "-O0", src, "-o", exe}, &out, &err), 0) << err;
  auto idx = hal::SymbolIndex::load(exe);
  ASSERT_TRUE(idx);
  const hal::ElfSymbol* s = (*idx)->find_function("target_fn");
  ASSERT_NE(s, nullptr);
  auto off = (*idx)->file_offset(s->value);
  ASSERT_TRUE(off);
  hal::Symbolizer sym;
  hal::NativeSymbol r = sym.symbolize("k1", exe, *off, false);
  EXPECT_EQ(r.function, "target_fn");
  EXPECT_EQ(r.file, src);
  EXPECT_EQ(r.line, 4);  // the body's opening brace: where the function's code starts
  EXPECT_EQ(r.build_id, (*idx)->build_id());
  // Cached: the same answer without reopening.
  EXPECT_EQ(sym.symbolize("k1", "/nonexistent", *off, false).function, "target_fn");
  EXPECT_EQ(sym.modules(), 1u);
}

// System and vendor libraries, and the Python interpreter wherever installed, are named by
// function only: their DWARF is not read (the tracer would keep it decompressed for the whole
// session).
TEST(Symbolizer, SystemLibrariesAreNamedWithoutLines) {
  for (const char* p : {"/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libz.so.1",
                        "/usr/lib64/libfoo.so", "/lib64/ld-linux-x86-64.so.2",
                        "/usr/local/cuda/lib64/libcudart.so.13", "/opt/rocm/lib/libamdhip64.so",
                        "/root/.pyenv/versions/3.11.9/lib/libpython3.11.so.1.0",
                        "/root/.pyenv/versions/3.11.9/bin/python3.11", "/opt/conda/bin/python3.12",
                        "/opt/py/bin/python3.13d", "/opt/py/lib/libpython3.10.so"})
    EXPECT_TRUE(hal::system_library(p)) << p;
  for (const char* p :
       {"/home/u/train/libmine.so", "/usr/local/lib/python3.12/x.so",
        "/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch.so", "/work/build/app",
        "/library/x.so", "", "/opt/py/bin/python3.11-config", "/home/u/python3.x",
        "/home/u/python3.", "/home/u/mypython3.11", "/home/u/libpython3.11.a"})
    EXPECT_FALSE(hal::system_library(p)) << p;
  std::string src = test::temp_path("nolines.c");
  std::ofstream(src) << "int target_fn(int y) { return y * 3; }\n"
                        "int main(void) { return target_fn(1) == 3 ? 0 : 1; }\n";
  std::string exe = test::temp_path("nolines");
  std::string out, err;
  ASSERT_EQ(test::run_command({"cc", "-g", "-O0", src, "-o", exe}, &out, &err), 0) << err;
  auto idx = hal::SymbolIndex::load(exe);
  ASSERT_TRUE(idx);
  auto off = (*idx)->file_offset((*idx)->find_function("target_fn")->value);
  ASSERT_TRUE(off);
  hal::Symbolizer sym;
  hal::NativeSymbol r = sym.symbolize("k1", exe, *off, false, false);
  EXPECT_EQ(std::tie(r.function, r.file, r.line),
            std::make_tuple(std::string("target_fn"), std::string(), 0));
  r = hal::Symbolizer().symbolize("k1", exe, *off, false, true);
  EXPECT_EQ(std::tie(r.file, r.line), std::make_tuple(src, 1));
}

// A stripped program whose DWARF lives in a separate file: found through .gnu_debuglink next
// to it, or through the build-id tree of the debug directory; without either, the symbol
// table still names the function and the frame keeps no line.
TEST(Symbolizer, SeparateDebugFilesByDebuglinkAndBuildId) {
  std::string dir = test::temp_path("debugsplit");
  std::filesystem::create_directories(dir);
  std::string src = dir + "/split.c";
  std::ofstream(src) << "int split_fn(int y)\n"
                        "{\n"
                        "  return y * 3;\n"
                        "}\n"
                        "int main(void) { return split_fn(2) == 6 ? 0 : 1; }\n";
  std::string exe = dir + "/split", dbg = dir + "/split.debug";
  auto sh = [&](std::vector<std::string> argv) {
    std::string out, err;
    int rc = test::run_command(argv, &out, &err);
    EXPECT_EQ(rc, 0) << argv[0] << ": " << err;
    return rc == 0;
  };
  ASSERT_TRUE(sh({"cc", "-g", "-O0", "-Wl,--build-id", src, "-o", exe}));
  ASSERT_TRUE(sh({"objcopy", "--only-keep-debug", exe, dbg}));
  ASSERT_TRUE(sh({"objcopy", "--strip-debug", "--add-gnu-debuglink=" + dbg, exe}));
  auto idx = hal::SymbolIndex::load(exe);
  ASSERT_TRUE(idx);
  const hal::ElfSymbol* s = (*idx)->find_function("split_fn");
  ASSERT_NE(s, nullptr);
  auto off = (*idx)->file_offset(s->value);
  ASSERT_TRUE(off);
  std::string bid = (*idx)->build_id();
  ASSERT_GT(bid.size(), 2u);

  // .gnu_debuglink: the debug file sits next to the program.
  hal::Symbolizer by_link;
  auto r = by_link.symbolize("link", exe, *off, false);
  EXPECT_EQ(r.function, "split_fn");
  EXPECT_EQ(r.file, src);
  EXPECT_EQ(r.line, 2);
  EXPECT_EQ(r.build_id, bid);

  // Build-id: the debug file only under DIR/.build-id/xx/rest.debug.
  std::string global = dir + "/global";
  std::filesystem::create_directories(global + "/.build-id/" + bid.substr(0, 2));
  std::filesystem::rename(
      dbg, global + "/.build-id/" + bid.substr(0, 2) + "/" + bid.substr(2) + ".debug");
  hal::Symbolizer by_id(global);
  r = by_id.symbolize("id", exe, *off, false);
  EXPECT_EQ(r.function, "split_fn");
  EXPECT_EQ(r.file, src);
  EXPECT_EQ(r.line, 2);

  // Neither: the symbol table still names the function; no line is invented.
  hal::Symbolizer none(dir + "/nowhere");
  r = none.symbolize("none", exe, *off, false);
  EXPECT_EQ(r.function, "split_fn");
  EXPECT_EQ(r.file, "");
  EXPECT_EQ(r.line, 0);
}

// A module that could not be opened is not remembered as unresolvable: the same file reached
// by another path later (a live process's root) resolves; once open, it stays open.
TEST(Symbolizer, FailedOpenIsRetriedFromAnotherPathAndPreloadKeepsTheFile) {
  std::string src = test::temp_path("retry.c"), exe = test::temp_path("retry");
  std::ofstream(src) << "int retry_fn(int y) { return y + 7; }\n"
                        "int main(void) { return retry_fn(0) == 7 ? 0 : 1; }\n";
  std::string out, err;
  ASSERT_EQ(test::run_command({"cc", "-g", "-O0", src, "-o", exe}, &out, &err), 0) << err;
  auto idx = hal::SymbolIndex::load(exe);
  ASSERT_TRUE(idx);
  auto off = (*idx)->file_offset((*idx)->find_function("retry_fn")->value);
  ASSERT_TRUE(off);
  hal::Symbolizer sym;
  EXPECT_EQ(sym.symbolize("k", "/nonexistent/retry", *off, false).function, "");
  EXPECT_FALSE(sym.has("k"));
  EXPECT_EQ(sym.symbolize("k", exe, *off, false).function, "retry_fn");
  EXPECT_TRUE(sym.has("k"));
  // Preloaded, then the file is gone: still answered from the open module.
  std::string copy = test::temp_path("retry-copy");
  std::filesystem::copy_file(exe, copy, std::filesystem::copy_options::overwrite_existing);
  sym.preload("copy", copy);
  ASSERT_TRUE(sym.has("copy"));
  std::filesystem::remove(copy);
  hal::NativeSymbol r = sym.symbolize("copy", copy, *off, false);
  EXPECT_EQ(r.function, "retry_fn");
  EXPECT_EQ(r.file, src);
  EXPECT_EQ(r.line, 1);
}

TEST(Symbolizer, UnreadableOrForeignFilesGiveEmptyAnswersNotCrashes) {
  hal::Symbolizer sym;
  EXPECT_EQ(sym.symbolize("missing", "/nonexistent/lib.so", 0x1000, true).function, "");
  std::string junk = test::temp_path("junk.so");
  std::ofstream(junk) << std::string(4096, 'x');
  auto r = sym.symbolize("junk", junk, 0x10, true);
  EXPECT_EQ(r.function, "");
  EXPECT_EQ(r.file, "");
  std::string trunc = test::temp_path("trunc.so");
  {
    std::ifstream in("/proc/self/exe", std::ios::binary);
    std::string head(200, '\0');
    in.read(head.data(), 200);
    std::ofstream(trunc, std::ios::binary) << head;
  }
  EXPECT_EQ(sym.symbolize("trunc", trunc, 0x10, true).function, "");
}

TEST(Symbolizer, Demangle) {
  EXPECT_EQ(hal::demangle("_ZN3foo3barEv"), "foo::bar()");
  EXPECT_EQ(hal::demangle("_ZN3foo3barEv+0x1f"), "foo::bar()+0x1f");
  EXPECT_EQ(hal::demangle("_ZN3foo3barEv.isra.0+0x5"), "foo::bar().isra.0+0x5");
  EXPECT_EQ(hal::demangle("cudaMalloc+0x2eb"), "cudaMalloc+0x2eb");
  EXPECT_EQ(hal::demangle("_Znot-valid"), "_Znot-valid");
}

ingero_stack_rec record(uint32_t pid, uint64_t hash, std::vector<uint64_t> ips) {
  ingero_stack_rec r{};
  r.type = INGERO_REC_STACK;
  r.pid = pid;
  r.tid = pid;
  r.hash = hash;
  r.n_ips = uint16_t(ips.size());
  for (size_t i = 0; i < ips.size(); ++i) r.ips[i] = ips[i];
  return r;
}

TEST(StackCollector, ResolvesDeduplicatesAndStopsAtGarbage) {
  std::string db = test::temp_path("stacks.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w);
  store::SessionInfo si;
  si.node = "t";
  ASSERT_TRUE((*w)->begin_session(si));
  StackCollector c(**w, nullptr);
  uint32_t me = uint32_t(getpid());
  // Return addresses inside the two markers, then a non-canonical "address" (what a broken
  // frame-pointer chain yields), then another valid one that must not survive it.
  uint64_t a = uint64_t(&ingero_stack_marker_a) + 4, b = uint64_t(&ingero_stack_marker_b) + 4;
  c.on_stack(record(me, 0x1111, {a, b, 0x633d8d4828ec8348ULL, a}));
  c.on_stack(record(me, 0x2222, {a, b}));  // another BPF hash, same frames: one stored stack
  uint64_t id1 = c.stack_id(me, 0x1111), id2 = c.stack_id(me, 0x2222);
  EXPECT_NE(id1, 0u);
  EXPECT_EQ(id1, id2);
  EXPECT_EQ(c.counters().stored, 1u);
  EXPECT_EQ(c.stack_id(me, 0x3333), 0u);  // never shipped
  EXPECT_EQ(c.counters().unknown_refs, 1u);
  EXPECT_EQ(c.stack_id(me, 0), 0u);  // no stack is not an unknown one
  EXPECT_EQ(c.counters().unknown_refs, 1u);
  ASSERT_TRUE((*w)->commit());
  auto rows =
      test::query_rows(db, "SELECT frame, kind, function, module = '" +
                               std::filesystem::read_symlink("/proc/self/exe").string() +
                               "', module_offset IS NOT NULL FROM stacks WHERE stack_id = " +
                               std::to_string(int64_t(id1)) + " ORDER BY frame");
  using V = std::vector<std::string>;
  EXPECT_EQ(rows, (std::vector<V>{{"0", "native", "ingero_stack_marker_a", "1", "1"},
                                  {"1", "native", "ingero_stack_marker_b", "1", "1"}}));
  c.process_exited(me);
  EXPECT_EQ(c.stack_id(me, 0x1111), 0u);  // forgotten with the process
}

// An address outside a live process's maps reads them again: a library loaded since is found
// there. Garbage (what a frame-pointer chain through code built without them yields: libtorch,
// cuDNN) is outside them still; after such a read the maps are not read again for
// kMapsRereadNs. The build before read the maps of every stack with garbage in it: ~2 ms each
// in a CUDA process, 6-7 s of the tracer's CPU on a 25 s ResNet-18 trace.
TEST(StackCollector, GarbageAddressesReadTheMapsAgainOnceAWhile) {
  std::string db = test::temp_path("stacks-reread.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->begin_session(store::SessionInfo{}));
  StackCollector c(**w, nullptr);
  uint32_t me = uint32_t(getpid());
  uint64_t a = uint64_t(&ingero_stack_marker_a) + 4;
  c.on_stack(record(me, 0x10, {a}));  // the snapshot is taken
  EXPECT_EQ(c.counters().maps_rereads, 0u);

  // Code mapped after the snapshot: read again, found.
  std::string file = test::temp_path("late-code.bin");
  std::filesystem::copy_file("/bin/true", file, std::filesystem::copy_options::overwrite_existing);
  int fd = open(file.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* code = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(code, MAP_FAILED);
  c.on_stack(record(me, 0x11, {a, uint64_t(code) + 16}));
  EXPECT_EQ(c.counters().maps_rereads, 1u);
  // Garbage after a valid frame, in stack after stack: one read, then none for a while.
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t h = 0; h < 2000; ++h) c.on_stack(record(me, 0x1000 + h, {a, 0x40 + h}));
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LE(c.counters().maps_rereads, 2u + uint64_t(ms) / 100) << ms << " ms";
  EXPECT_EQ(c.counters().native_frames, 1u + 2u + 2000u);  // every garbage address cut off
  munmap(code, 4096);
  ASSERT_TRUE((*w)->commit());
  EXPECT_EQ(
      test::query_rows(db, "SELECT frame, module = '" + file + "' FROM stacks WHERE stack_id = " +
                               std::to_string(int64_t(c.stack_id(me, 0x11))) + " ORDER BY frame"),
      (std::vector<std::vector<std::string>>{{"0", "0"}, {"1", "1"}}));
}

// Found by a hostile-testing helper (helper-71): a short-lived process's stacks, read once it
// had exited but before it was reaped, were cut at their first frame: a zombie answers kill(0)
// and its maps read empty, so every address looked like garbage past a broken frame-pointer
// chain. Its frames stay raw addresses, as those of a process gone for good do.
TEST(StackCollector, AZombiesStackKeepsItsFramesAsAddresses) {
  std::string db = test::temp_path("stacks-zombie.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->begin_session(store::SessionInfo{}));
  StackCollector c(**w, nullptr);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, id_t(child), &info, WEXITED | WNOWAIT), 0);  // exited, not reaped
  ASSERT_EQ(kill(child, 0), 0);
  uint64_t a = uint64_t(&ingero_stack_marker_a) + 4, b = uint64_t(&ingero_stack_marker_b) + 4;
  c.on_stack(record(uint32_t(child), 0x77, {a, b, a}));
  EXPECT_EQ(c.counters().empty, 0u);
  EXPECT_EQ(c.counters().native_frames, 3u);
  uint64_t id = c.stack_id(uint32_t(child), 0x77);
  ASSERT_NE(id, 0u);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE((*w)->commit());
  EXPECT_EQ(test::query_rows(db, "SELECT frame, module_offset FROM stacks WHERE stack_id = " +
                                     std::to_string(int64_t(id)) + " ORDER BY frame"),
            (std::vector<std::vector<std::string>>{{"0", std::to_string(int64_t(a))},
                                                   {"1", std::to_string(int64_t(b))},
                                                   {"2", std::to_string(int64_t(a))}}));
}

// At a session's end the collector gives back what it holds (processes, stored stacks' ids,
// open modules) and keeps its counts for the summary; a stack offered again is resolved anew
// and kept once.
TEST(StackCollector, ReleaseForgetsWhatItHoldsAndKeepsItsCounts) {
  std::string db = test::temp_path("stacks-release.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->begin_session(store::SessionInfo{}));
  StackCollector c(**w, nullptr);
  uint32_t me = uint32_t(getpid());
  uint64_t a = uint64_t(&ingero_stack_marker_a) + 4, b = uint64_t(&ingero_stack_marker_b) + 4;
  c.on_stack(record(me, 0x1111, {a, b}));
  uint64_t id = c.stack_id(me, 0x1111);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(c.processes(), 1u);
  EXPECT_EQ(c.open_modules(), 1u);
  c.release();
  EXPECT_EQ(c.processes(), 0u);
  EXPECT_EQ(c.open_modules(), 0u);
  EXPECT_EQ(c.counters().received, 1u);
  EXPECT_EQ(c.counters().stored, 1u);
  EXPECT_EQ(c.counters().native_frames, 2u);
  EXPECT_EQ(c.stack_id(me, 0x1111), 0u);  // its id went with the process
  EXPECT_EQ(c.counters().unknown_refs, 1u);
  c.on_stack(record(me, 0x1111, {a, b}));
  EXPECT_EQ(c.stack_id(me, 0x1111), id);
  EXPECT_EQ(c.counters().stored, 2u);  // offered to the sink again
  ASSERT_TRUE((*w)->commit());
  EXPECT_EQ(test::query_int(
                db, "SELECT count(*) FROM stacks WHERE stack_id = " + std::to_string(int64_t(id))),
            2);  // its two frames, once
}

// On a host-wide trace every exec of the host is shown to the collector: a process gone before
// it is looked at leaves nothing, and one that exits without ever having a stack (it made no
// traced call, so no exit of it is reported) is forgotten by the periodic sweep, unless the
// caller keeps it.
TEST(StackCollector, ProcessesWithoutStacksThatAreGoneAreForgotten) {
  std::string db = test::temp_path("stacks-gone.db");
  auto w = store::TraceWriter::open(db);
  ASSERT_TRUE(w);
  ASSERT_TRUE((*w)->begin_session(store::SessionInfo{}));
  StackCollector c(**w, nullptr);
  auto a = test::Subprocess::spawn({"/bin/sleep", "30"});
  auto b = test::Subprocess::spawn({"/bin/sleep", "30"});
  auto gone = test::Subprocess::spawn({"/bin/true"});
  ASSERT_EQ(gone.wait(), 0);
  c.process_changed(uint32_t(gone.pid()));
  EXPECT_EQ(c.processes(), 0u);
  c.process_changed(uint32_t(a.pid()));
  c.process_changed(uint32_t(b.pid()));
  EXPECT_EQ(c.processes(), 2u);
  // The maps handed in are the snapshot (no read of its own).
  hal::MapEntry x;
  x.start = 0x1000;
  x.end = 0x2000;
  std::memcpy(x.perms, "r-xp", 4);
  x.path = "/x";
  c.process_changed(uint32_t(a.pid()), {x});
  ASSERT_EQ(c.maps_of(uint32_t(a.pid())).size(), 1u);
  EXPECT_EQ(c.maps_of(uint32_t(a.pid()))[0].path, "/x");
  c.forget_gone();
  EXPECT_EQ(c.processes(), 2u);  // both live
  a.signal(SIGKILL);
  a.wait();
  b.signal(SIGKILL);
  b.wait();
  uint32_t kept = uint32_t(b.pid());
  c.forget_gone([&](uint32_t pid) { return pid == kept; });
  EXPECT_EQ(c.processes(), 1u);
  EXPECT_FALSE(c.maps_of(kept).empty());
  c.forget_gone();
  EXPECT_EQ(c.processes(), 0u);
}

}  // namespace
}  // namespace ingero::capture
