// Kernel names without privileges: the name sources' captures as the decoder reads them from
// records (the real CUDA and HIP tables), the short display names, and the namer that reads
// each name in user space, over a fake process (maps, file, memory and symbols).
#include "capture/kernel_namer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_driver_probes.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "backends/hip/hip_backend.h"
#include "backends/hip/hip_probes.h"
#include "probe/record_decoder.h"
#include "probe/record_layout.h"

namespace ingero {
namespace {

using hal::KernelNameSource;

const hal::ProbeSpec& spec_named(std::span<const hal::ProbeSpec> t, std::string_view name) {
  for (const auto& s : t)
    if (s.symbol == name) return s;
  throw std::runtime_error("no spec " + std::string(name));
}

class NameCaptures : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_ = backends::make_cuda_backend();
    hip_ = backends::make_hip_backend();
  }
  uint32_t add(const hal::VendorBackend* b, std::span<const hal::ProbeSpec> t,
               std::string_view sym) {
    return table_.add(
        {b, &spec_named(t, sym), {"nvidia", "x", 0, false}, "/lib/x.so", std::string(sym)});
  }
  hal::CallRecord rec(uint32_t id, int32_t ret = 0) {
    hal::CallRecord r;
    r.hdr.type = INGERO_REC_CALL;
    r.hdr.probe_id = id;
    r.hdr.pid = 77;
    r.hdr.tid = 77;
    r.hdr.start_ns = 5000;
    r.hdr.end_ns = 6000;
    r.hdr.ret = uint32_t(ret);
    r.hdr.nregs = hal::make_recipe(*table_.find(id)->spec).nregs;
    return r;
  }
  static hal::CallRecord wire(const hal::CallRecord& r) {
    auto bytes = hal::pack_call(r);
    hal::CallRecord out;
    EXPECT_TRUE(hal::unpack_call(bytes.data(), bytes.size(), out));
    return out;
  }
  std::optional<hal::NameCapture> capture(const hal::CallRecord& r) {
    return hal::CallDecoder(table_).name_capture(wire(r));
  }
  static void output(hal::CallRecord& r, uint64_t v) {
    std::memcpy(r.return_buf, &v, 8);
    r.hdr.return_len = 8;
  }
  std::unique_ptr<hal::VendorBackend> cuda_, hip_;
  hal::ProbeTable table_;
};

TEST_F(NameCaptures, RegistrationNamesTheHostStubByItsDeviceName) {
  uint32_t id = add(cuda_.get(), backends::cuda::kRuntimeProbes, "__cudaRegisterFunction");
  EXPECT_EQ(table_.find(id)->spec->kind, hal::EventKind::kKernelName);
  auto r = rec(id);
  r.regs[0] = 0x1000;  // the module handle
  r.regs[1] = 0x401e45;
  r.regs[2] = 0x402010;  // deviceFun
  r.regs[3] = 0x402010;  // deviceName
  auto c = capture(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->pid, 77u);
  EXPECT_EQ(c->func, 0x401e45u);
  EXPECT_EQ(c->name_addr, 0x402010u);
  EXPECT_FALSE(c->alias_of);
  EXPECT_EQ(c->source, KernelNameSource::kRegistration);
  // Only the registers it names are shipped.
  EXPECT_EQ(hal::make_recipe(*table_.find(id)->spec).nregs, 4);
}

TEST_F(NameCaptures, LookUpNamesTheHandleItWroteAndNothingWhenItFailed) {
  uint32_t id = add(cuda_.get(), backends::cuda::kDriverProbes, "cuModuleGetFunction");
  auto r = rec(id);
  r.regs[2] = 0x4020a0;
  output(r, 0x55aa00112200);
  auto c = capture(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->func, 0x55aa00112200u);
  EXPECT_EQ(c->name_addr, 0x4020a0u);
  EXPECT_EQ(c->source, KernelNameSource::kDriverLookup);
  auto failed = rec(id, 500);  // CUDA_ERROR_NOT_FOUND: the output was not written
  failed.regs[2] = 0x4020a0;
  output(failed, 0x55aa00112200);
  EXPECT_FALSE(capture(failed));
  auto faulted = rec(id);  // the output pointer could not be read
  faulted.regs[2] = 0x4020a0;
  faulted.hdr.flags = INGERO_CALL_RETURN_READ_FAULT;
  EXPECT_FALSE(capture(faulted));
  auto unfinished = rec(id);
  unfinished.regs[2] = 0x4020a0;
  output(unfinished, 0x55aa00112200);
  unfinished.hdr.flags = INGERO_CALL_UNFINISHED;
  EXPECT_FALSE(capture(unfinished));
  // Shipped at entry, its probe put to rest before it returned: its answer was never read.
  auto at_entry = rec(id);
  at_entry.regs[2] = 0x4020a0;
  output(at_entry, 0x55aa00112200);
  at_entry.hdr.flags = INGERO_CALL_ENTRY_ONLY;
  EXPECT_FALSE(capture(at_entry));
}

TEST_F(NameCaptures, AHandleOfAStubTakesTheStubsNameAndGetNameReadsTheReturnedPointer) {
  uint32_t get = add(cuda_.get(), backends::cuda::kRuntimeProbes, "__cudaGetKernel");
  auto r = rec(get);
  r.regs[1] = 0x401e45;
  output(r, 0x7f3300000010);
  auto c = capture(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->func, 0x7f3300000010u);
  EXPECT_EQ(c->alias_of, 0x401e45u);
  EXPECT_FALSE(c->name_addr);
  // Without a GPU it fails and leaves the stub in the handle: nothing to alias.
  auto failed = rec(get, 35);
  failed.regs[1] = 0x401e45;
  output(failed, 0x401e45);
  EXPECT_FALSE(capture(failed));
  uint32_t name = add(cuda_.get(), backends::cuda::kDriverProbes, "cuFuncGetName");
  auto n = rec(name);
  n.regs[1] = 0x55aa00112200;
  output(n, 0x55aa00990000);
  auto nc = capture(n);
  ASSERT_TRUE(nc);
  EXPECT_EQ(nc->func, 0x55aa00112200u);
  EXPECT_EQ(nc->name_addr, 0x55aa00990000u);
}

TEST_F(NameCaptures, HipNameRefReturnsTheNameAndOtherProbesAreNoNameSource) {
  uint32_t id = add(hip_.get(), backends::hip::kHipProbes, "hipKernelNameRef");
  auto r = rec(id);
  r.regs[0] = 0x7000;
  r.hdr.ret = 0x7f00aabbcc00;  // a pointer: all 64 bits count
  auto c = capture(r);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->func, 0x7000u);
  EXPECT_EQ(c->name_addr, 0x7f00aabbcc00u);
  uint32_t launch = add(cuda_.get(), backends::cuda::kRuntimeProbes, "cudaLaunchKernel");
  EXPECT_FALSE(capture(rec(launch)));
  // A registration of a null stub names nothing.
  uint32_t reg = add(hip_.get(), backends::hip::kHipProbes, "__hipRegisterFunction");
  auto z = rec(reg);
  z.regs[3] = 0x402010;
  EXPECT_FALSE(capture(z));
}

TEST(KernelNameText, ShortNamesDropReturnTypeAndParameters) {
  using hal::short_kernel_name;
  EXPECT_EQ(short_kernel_name("void scale<float>(float*, float, int)"), "scale<float>");
  EXPECT_EQ(short_kernel_name("physics::step(double*, int)"), "physics::step");
  EXPECT_EQ(short_kernel_name("mul"), "mul");
  EXPECT_EQ(short_kernel_name("unsigned int count<4>(int)"), "count<4>");
  EXPECT_EQ(short_kernel_name("(anonymous namespace)::fill(float*)"),
            "(anonymous namespace)::fill");
  EXPECT_EQ(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, "
                              "at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> "
                              ">(int, at::native::CUDAFunctor_add<float>, "
                              "at::detail::Array<char*, 3>)"),
            "at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >");
  EXPECT_EQ(short_kernel_name("void k<void (*)(int)>(void (*)(int))"), "k<void (*)(int)>");
  EXPECT_EQ(short_kernel_name("void gemm<128>(float*) const"), "gemm<128>");
  EXPECT_EQ(short_kernel_name(""), "");
  EXPECT_EQ(hal::kernel_name_source_name(KernelNameSource::kElfSymbol), "elf_symbol");
  EXPECT_EQ(hal::kernel_name_source_from("driver_lookup"), KernelNameSource::kDriverLookup);
  EXPECT_EQ(hal::kernel_name_source_from("guess"), KernelNameSource::kNone);
}

// A process as the namer sees it: its maps, its files' bytes, its memory and its symbols.
class FakeImage final : public capture::ProcessImage {
 public:
  std::map<uint32_t, std::string> maps_text;
  std::map<std::string, std::string> files;                               // path -> bytes
  std::map<uint32_t, std::map<uint64_t, std::string>> mem;                // pid -> addr -> bytes
  std::map<std::pair<std::string, uint64_t>, hal::NativeSymbol> symbols;  // (path, offset)
  int maps_reads = 0, file_reads = 0, mem_reads = 0;

  std::string maps(uint32_t pid) override {
    ++maps_reads;
    auto it = maps_text.find(pid);
    return it == maps_text.end() ? "" : it->second;
  }
  ingero::Result<std::string> read_file(uint32_t, const hal::MapEntry& m, uint64_t offset,
                                        size_t len) override {
    ++file_reads;
    auto it = files.find(m.path);
    if (it == files.end()) return ingero::make_error(m.path + ": no such file");
    if (offset >= it->second.size()) return std::string();
    return it->second.substr(offset, len);
  }
  ingero::Result<std::string> read_memory(uint32_t pid, uint64_t addr, size_t len) override {
    ++mem_reads;
    for (const auto& [base, bytes] : mem[pid])
      if (addr >= base && addr < base + bytes.size()) return bytes.substr(addr - base, len);
    return ingero::make_error("EIO");
  }
  hal::NativeSymbol symbol_at(uint32_t, const hal::MapEntry& m, uint64_t offset) override {
    auto it = symbols.find({m.path, offset});
    return it == symbols.end() ? hal::NativeSymbol{} : it->second;
  }
};

// Records what sinks receive.
struct NameSink final : hal::EventSink {
  std::vector<hal::KernelName> names;
  ingero::Status on_event(const hal::Event&) override { return {}; }
  ingero::Status on_kernel_name(const hal::KernelName& k) override {
    names.push_back(k);
    return {};
  }
};

class Namer : public ::testing::Test {
 protected:
  void SetUp() override {
    auto img = std::make_unique<FakeImage>();
    image = img.get();
    // The program: text at 0x400000 (file offset 0), read-only data at 0x402000 (offset
    // 0x2000), writable data at 0x404000 (offset 0x4000), the heap.
    image->maps_text[77] =
        "00400000-00402000 r-xp 00000000 08:01 1234 /opt/app/trainer\n"
        "00402000-00403000 r--p 00002000 08:01 1234 /opt/app/trainer\n"
        "00404000-00405000 rw-p 00004000 08:01 1234 /opt/app/trainer\n"
        "01000000-01100000 rw-p 00000000 00:00 0 [heap]\n";
    std::string file(0x5000, '\0');
    std::memcpy(&file[0x2010], "_Z5scaleIfEvPT_S0_i", 19);
    std::memcpy(&file[0x2100], "mul", 3);
    std::memcpy(&file[0x4010], "stale_name", 10);  // the file's copy of a changed global
    std::memcpy(&file[0x2200], "bad\x01name", 8);
    std::memcpy(&file[0x2300], "lib/x86_64-linux-gnu/libk5crypto.so.3",
                37);  // printable, no symbol
    image->files["/opt/app/trainer"] = file;
    image->mem[77][0x1000000] = std::string("_ZN4conv7forwardEPKfPf\0", 23);
    image->mem[77][0x404010] = std::string("live_name\0", 10);
    namer = std::make_unique<capture::KernelNamer>(sink, std::move(img));
  }
  hal::NameCapture cap(uint64_t func, std::optional<uint64_t> name,
                       std::optional<uint64_t> alias = std::nullopt,
                       KernelNameSource s = KernelNameSource::kRegistration, uint64_t ts = 100) {
    return {77, ts, func, name, alias, s};
  }
  std::vector<std::pair<uint64_t, std::string>> named() const {
    std::vector<std::pair<uint64_t, std::string>> out;
    for (const auto& n : sink.names) out.push_back({n.func, n.name});
    return out;
  }
  NameSink sink;
  FakeImage* image = nullptr;
  std::unique_ptr<capture::KernelNamer> namer;
};

TEST_F(Namer, ARegisteredNameIsReadFromTheFileAndHandedOnOnce) {
  namer->on_capture(cap(0x401e45, 0x402010));
  ASSERT_EQ(sink.names.size(), 1u);
  EXPECT_EQ(sink.names[0].pid, 77u);
  EXPECT_EQ(sink.names[0].name, "void scale<float>(float*, float, int)");
  EXPECT_EQ(sink.names[0].raw, "_Z5scaleIfEvPT_S0_i");
  EXPECT_EQ(sink.names[0].source, KernelNameSource::kRegistration);
  EXPECT_EQ(image->mem_reads, 0);  // read-only file pages: the file holds the bytes
  for (int i = 0; i < 400; ++i) namer->on_launch(77, 0x401e45, 200);
  // The same key again (a second source) keeps the first name.
  namer->on_capture(cap(0x401e45, 0x402100, std::nullopt, KernelNameSource::kDriverLookup));
  EXPECT_EQ(sink.names.size(), 1u);
  const auto& c = namer->counters();
  EXPECT_EQ(c.names, 1u);
  EXPECT_EQ(c.by_source[size_t(KernelNameSource::kRegistration)], 1u);
  EXPECT_EQ(c.named_launches, 400u);
  EXPECT_EQ(c.unnamed_launches, 0u);
  EXPECT_EQ(image->maps_reads, 1);
}

// A child forked after its parent registered its kernels launches them by the parent's names
// (helper-72: a stripped program's forked children launched 13 kernels unnamed); nothing is
// copied at the fork, and a process that was not forked from it, or has exec'd since, is not
// named so.
TEST_F(Namer, AForkedChildLaunchesItsParentsKernelsByTheirNames) {
  namer->on_capture(cap(0x401e45, 0x402010));
  namer->process_fork(77, 78, 150);
  namer->process_fork(78, 79, 160);  // a grandchild
  namer->process_fork(77, 80, 170);
  namer->process_exec(80, 180);
  ASSERT_EQ(sink.names.size(), 1u);
  namer->on_launch(78, 0x401e45, 200);
  namer->on_launch(79, 0x401e45, 200);
  namer->on_launch(80, 0x401e45, 200);
  namer->on_launch(81, 0x401e45, 200);
  ASSERT_EQ(sink.names.size(), 3u);
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(sink.names[i].pid, i == 1 ? 78u : 79u);
    EXPECT_EQ(sink.names[i].func, 0x401e45u);
    EXPECT_EQ(sink.names[i].name, "void scale<float>(float*, float, int)");
    EXPECT_EQ(sink.names[i].source, KernelNameSource::kRegistration);
  }
  EXPECT_EQ(namer->counters().named_launches, 2u);
  EXPECT_EQ(namer->counters().unnamed_launches, 2u);
}

// cuDNN looks each kernel up again before every launch: once a function has its name, its repeats
// read nothing, whichever address or key they name it by.
TEST_F(Namer, ALookUpOfAFunctionAlreadyNamedReadsNothing) {
  EXPECT_TRUE(
      namer->on_capture(cap(0x55aa0001, 0x402010, std::nullopt, KernelNameSource::kDriverLookup)));
  int reads = image->file_reads + image->mem_reads;
  ASSERT_GT(reads, 0);
  int news = 0;
  for (int i = 0; i < 50; ++i) {
    news +=
        namer->on_capture(cap(0x55aa0001, 0x402010, std::nullopt, KernelNameSource::kDriverLookup));
    news += namer->on_capture(
        cap(0x55aa0001, 0x1000000, std::nullopt, KernelNameSource::kDriverLookup));
    news +=
        namer->on_capture(cap(0x55aa0001, std::nullopt, 0x401e45, KernelNameSource::kDriverLookup));
  }
  EXPECT_EQ(news, 0);  // no news: capture/lookup_rest.h counts these toward a rest
  EXPECT_EQ(image->file_reads + image->mem_reads, reads);
  EXPECT_EQ(named(), (std::vector<std::pair<uint64_t, std::string>>{
                         {0x55aa0001, "void scale<float>(float*, float, int)"}}));
  EXPECT_EQ(namer->counters().captures, 1u);
  EXPECT_EQ(namer->counters().repeats, 150u);
  // A key not yet named is still read.
  EXPECT_TRUE(
      namer->on_capture(cap(0x55aa0002, 0x402100, std::nullopt, KernelNameSource::kDriverLookup)));
  EXPECT_EQ(named().back(), (std::pair<uint64_t, std::string>{0x55aa0002, "mul"}));
  EXPECT_EQ(namer->counters().captures, 2u);
}

TEST_F(Namer, HeapAndWritableDataAreReadFromMemoryAndJunkIsRefused) {
  namer->on_capture(cap(0x55aa0001, 0x1000000, std::nullopt, KernelNameSource::kDriverLookup));
  namer->on_capture(cap(0x55aa0002, 0x404010));
  namer->on_capture(cap(0x55aa0003, 0x402200));    // not a name: never guessed
  namer->on_capture(cap(0x55aa0004, 0x7fff0000));  // mapped nowhere, unreadable
  namer->on_capture(cap(0x55aa0005, 0x402300));    // printable text, but a path: no symbol
  EXPECT_EQ(named(),
            (std::vector<std::pair<uint64_t, std::string>>{
                {0x55aa0001, "conv::forward(float const*, float*)"}, {0x55aa0002, "live_name"}}));
  EXPECT_EQ(namer->counters().unreadable, 3u);
}

TEST_F(Namer, AHandleTakesItsStubsNameWhenEitherComesFirst) {
  namer->on_capture(cap(0x401e45, 0x402010));
  namer->on_capture(cap(0x7f3300000010, std::nullopt, 0x401e45));
  // A stub named after its handle was looked up: the handle follows.
  namer->on_capture(cap(0x7f3300000020, std::nullopt, 0x401f00));
  namer->on_capture(cap(0x401f00, 0x402100));
  EXPECT_EQ(named(), (std::vector<std::pair<uint64_t, std::string>>{
                         {0x401e45, "void scale<float>(float*, float, int)"},
                         {0x7f3300000010, "void scale<float>(float*, float, int)"},
                         {0x401f00, "mul"},
                         {0x7f3300000020, "mul"}}));
}

TEST_F(Namer, AStubRegisteredBeforeTheTraceIsNamedByItsExactSymbolOnly) {
  auto sym = [](const char* function, const char* raw, uint64_t offset) {
    hal::NativeSymbol s;
    s.function = function;
    s.raw = raw;
    s.symbol_offset = offset;
    return s;
  };
  image->symbols[{"/opt/app/trainer", 0x1e45}] =
      sym("void scale<float>(float*, float, int)", "_Z5scaleIfEvPT_S0_i", 0);
  image->symbols[{"/opt/app/trainer", 0x1e50}] = sym("main+0x10", "main", 0x10);
  for (int i = 0; i < 3; ++i) namer->on_launch(77, 0x401e45, 200);
  for (int i = 0; i < 5; ++i) namer->on_launch(77, 0x401e50, 200);    // inside main: no name
  for (int i = 0; i < 2; ++i) namer->on_launch(77, 0xdead0000, 200);  // a handle: unmapped
  ASSERT_EQ(sink.names.size(), 1u);
  EXPECT_EQ(sink.names[0].source, KernelNameSource::kElfSymbol);
  EXPECT_EQ(sink.names[0].name, "void scale<float>(float*, float, int)");
  const auto& c = namer->counters();
  EXPECT_EQ(c.named_launches, 3u);
  EXPECT_EQ(c.unnamed_launches, 7u);
  EXPECT_EQ(c.unnamed_functions, 2u);
  EXPECT_EQ(c.by_source[size_t(KernelNameSource::kElfSymbol)], 1u);
  // Its handle, looked up now, takes the symbol's name too; unnamed launches named later
  // are counted named (calls.kernel joins the name whenever it came).
  namer->on_capture(cap(0xdead0000, 0x402100, std::nullopt, KernelNameSource::kDriverLookup));
  EXPECT_EQ(c.unnamed_launches, 5u);
  EXPECT_EQ(c.named_launches, 5u);
  EXPECT_EQ(c.unnamed_functions, 1u);
  // Functions first launched unnamed only grow (the kernel look-ups at rest wake by it): the
  // handle named since still counts, and its launches from now on add nothing.
  EXPECT_EQ(c.launched_unnamed, 2u);
  for (int i = 0; i < 4; ++i) namer->on_launch(77, 0xdead0000, 300);
  namer->on_launch(77, 0xdead1000, 300);
  EXPECT_EQ(c.launched_unnamed, 3u);
  EXPECT_EQ(c.unnamed_functions, 2u);
}

// While the kernel look-ups rest, a function first launched without a name is counted as such
// until a name comes; one launched unnamed before the rest is not.
TEST_F(Namer, FunctionsFirstLaunchedUnnamedWhileTheLookUpsRestAreCountedUntilNamed) {
  namer->on_launch(77, 0xdead0000, 100);
  namer->set_lookups_resting(true);
  for (int i = 0; i < 3; ++i) namer->on_launch(77, 0xdead1000, 200);
  namer->on_launch(77, 0xdead2000, 200);
  namer->on_launch(77, 0xdead0000, 200);  // unnamed since before the rest
  const auto& c = namer->counters();
  EXPECT_EQ(c.unnamed_functions, 3u);
  EXPECT_EQ(c.unnamed_at_rest, 2u);
  namer->set_lookups_resting(false);
  namer->on_capture(cap(0xdead1000, 0x402100, std::nullopt, KernelNameSource::kDriverLookup));
  EXPECT_EQ(c.unnamed_at_rest, 1u);
  EXPECT_EQ(c.unnamed_functions, 2u);
  namer->on_launch(77, 0xdead3000, 300);  // awake again: not counted
  EXPECT_EQ(c.unnamed_at_rest, 1u);
  EXPECT_EQ(c.launched_unnamed, 4u);
}

TEST_F(Namer, AProcessGoneBeforeItsNamesWereReadUsesTheMapsKeptOfIt) {
  // Gone before its record is read, and nothing kept of it: counted, not named...
  namer->on_capture({99, 100, 0x401e45, 0x402010, std::nullopt, KernelNameSource::kRegistration});
  EXPECT_TRUE(sink.names.empty());
  EXPECT_EQ(namer->counters().unreadable, 1u);
  // ... but the maps kept elsewhere (the stack collector's, from its first stack) name it, and
  // its exec record, read after its registrations, reads nothing and drops none of them.
  namer->maps_fallback = [](uint32_t pid) {
    return pid == 98 ? hal::parse_proc_maps(
                           "00400000-00403000 r-xp 00000000 08:01 1234 /opt/app/trainer\n")
                     : std::vector<hal::MapEntry>{};
  };
  namer->on_capture({98, 100, 0x401e45, 0x402010, std::nullopt, KernelNameSource::kRegistration});
  ASSERT_EQ(sink.names.size(), 1u);
  EXPECT_EQ(sink.names[0].pid, 98u);
  EXPECT_EQ(sink.names[0].raw, "_Z5scaleIfEvPT_S0_i");
  int reads = image->maps_reads;
  namer->process_exec(98, 50);
  namer->process_exec(97, 50);  // a process never needed: nothing read, nothing kept
  EXPECT_EQ(image->maps_reads, reads);
  namer->on_launch(98, 0x401e45, 200);
  EXPECT_EQ(namer->counters().named_launches, 1u);
}

TEST_F(Namer, ExecStartsAFreshImageAndALibraryMappedLaterIsFound) {
  namer->on_capture(cap(0x401e45, 0x402010));
  namer->process_exec(77, 150);
  // The new program's kernel at that address.
  namer->on_capture(cap(0x401e45, 0x402100, std::nullopt, KernelNameSource::kRegistration, 200));
  EXPECT_EQ(named(), (std::vector<std::pair<uint64_t, std::string>>{
                         {0x401e45, "void scale<float>(float*, float, int)"}, {0x401e45, "mul"}}));
  // A name in a library mapped after the last read of the maps: read again.
  image->maps_text[77] += "7f0000000000-7f0000001000 r--p 00000000 08:01 99 /opt/lib/libk.so\n";
  std::string lib(0x100, '\0');
  std::memcpy(&lib[0x40], "lib_kernel", 10);
  image->files["/opt/lib/libk.so"] = lib;
  namer->on_capture(
      cap(0x7f0000000800, 0x7f0000000040, std::nullopt, KernelNameSource::kRegistration, 200));
  EXPECT_EQ(sink.names.back().name, "lib_kernel");
  // The calls ring is read before the host ring: registrations made after an exec can come
  // before its record, and stay.
  namer->on_capture(cap(0x401f00, 0x402010, std::nullopt, KernelNameSource::kRegistration, 300));
  namer->process_exec(77, 250);
  size_t before = sink.names.size();
  namer->on_launch(77, 0x401f00, 400);
  EXPECT_EQ(sink.names.size(), before);
  EXPECT_EQ(namer->counters().unnamed_launches, 0u);
  EXPECT_EQ(namer->counters().named_launches, 1u);
}

}  // namespace
}  // namespace ingero
