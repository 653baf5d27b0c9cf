// The record decoder: synthetic ring-buffer records through the same CallDecoder the tracer
// uses, with the real CUDA backend tables.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_driver_probes.h"
#include "backends/cuda/cuda_runtime_probes.h"
#include "backends/hip/hip_probes.h"
#include "probe/record_decoder.h"
#include "probe/record_layout.h"

namespace ingero::hal {
namespace {

const ProbeSpec& spec_named(std::span<const ProbeSpec> t, std::string_view name) {
  for (const auto& s : t)
    if (s.symbol == name) return s;
  throw std::runtime_error("no spec " + std::string(name));
}

class DecoderTest : public ::testing::Test {
 protected:
  void SetUp() override { cuda_ = backends::make_cuda_backend(); }
  uint32_t add(std::string_view api, std::span<const ProbeSpec> t, std::string_view sym) {
    return table_.add({cuda_.get(),
                       &spec_named(t, sym),
                       {"nvidia", api, 0, false},
                       "/lib/x.so",
                       std::string(sym)});
  }
  // A call record as BPF ships it for this probe: the registers and stack words its recipe
  // keeps, the thread's name on its first call.
  CallRecord rec(uint32_t id) {
    CallRecord r;
    r.hdr.type = INGERO_REC_CALL;
    r.hdr.probe_id = id;
    r.hdr.pid = 4242;
    r.hdr.tid = 4243;
    r.hdr.start_ns = 1000;
    r.hdr.end_ns = 6000;
    r.hdr.ret = 0xffffffff00000023ull;  // garbage in the upper half, 35 in eax
    auto recipe = make_recipe(*table_.find(id)->spec);
    r.hdr.nregs = recipe.nregs;
    r.hdr.nstack = recipe.stack_words;
    r.hdr.flags = INGERO_CALL_IDENT;
    std::strcpy(r.ident.comm, "trainer");
    return r;
  }
  // Through the wire format and back, as the pipeline receives it.
  static CallRecord wire(const CallRecord& r) {
    auto bytes = pack_call(r);
    CallRecord out;
    EXPECT_TRUE(unpack_call(bytes.data(), bytes.size(), out));
    return out;
  }
  std::unique_ptr<VendorBackend> cuda_;
  ProbeTable table_;
};

TEST_F(DecoderTest, LaunchUnpacksDim3RegistersAndStackArguments) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaLaunchKernel");
  auto r = rec(id);
  r.regs[0] = 0xf00d;
  r.regs[1] = (uint64_t(4) << 32) | 8;  // grid x=8 y=4
  r.regs[2] = 2;                        // grid z
  r.regs[3] = (uint64_t(2) << 32) | 128;
  r.regs[4] = 1;
  r.stack[0] = 256;
  r.stack[1] = 0x5151;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.kind, EventKind::kLaunch);
  EXPECT_EQ(ev.op, "cudaLaunchKernel");
  EXPECT_EQ(ev.api, "cuda_runtime");
  EXPECT_EQ(ev.dur_ns, 5000u);
  EXPECT_EQ(ev.ret, 35);
  EXPECT_TRUE(ev.has_ret);
  EXPECT_EQ(ev.comm_view(), "trainer");
  EXPECT_EQ(ev.get(Field::kFunc), 0xf00du);
  EXPECT_EQ(ev.get(Field::kGridX), 8u);
  EXPECT_EQ(ev.get(Field::kGridY), 4u);
  EXPECT_EQ(ev.get(Field::kGridZ), 2u);
  EXPECT_EQ(ev.get(Field::kBlockX), 128u);
  EXPECT_EQ(ev.get(Field::kBlockY), 2u);
  EXPECT_EQ(ev.get(Field::kBlockZ), 1u);
  EXPECT_EQ(ev.get(Field::kSharedMem), 256u);
  EXPECT_EQ(ev.get(Field::kStream), 0x5151u);
  EXPECT_FALSE(ev.has(Field::kBytes));
}

// An untimed launch as launch_at_entry writes it: the short header, its words, its caller.
TEST_F(DecoderTest, AnUntimedLaunchsShortRecordDecodesAsTheFullOne) {
  uint32_t id = add("cuda_driver", backends::cuda::kDriverProbes, "cuLaunchKernel");
  auto r = rec(id);
  r.hdr.end_ns = 0;
  r.hdr.ret = 0;
  r.hdr.stack_hash = 0x5eed;
  r.hdr.flags = INGERO_CALL_ENTRY_ONLY | INGERO_CALL_IDENT | INGERO_CALL_CALLER;
  for (int i = 0; i < INGERO_REG_WORDS; ++i) r.regs[i] = uint64_t(10 + i);
  r.stack[0] = 1;       // blockDimZ
  r.stack[1] = 512;     // sharedMemBytes
  r.stack[2] = 0x5151;  // hStream
  r.caller = 0x7f00deadbeef;
  auto full = pack_call(r);
  auto short_form = pack_launch(r);
  ASSERT_EQ(short_form.size(), full.size() - (sizeof(ingero_call_rec) - sizeof(ingero_launch_rec)));
  uint32_t type = 0;
  std::memcpy(&type, short_form.data(), sizeof(type));
  EXPECT_EQ(type, uint32_t(INGERO_REC_LAUNCH));
  CallRecord a, b;
  ASSERT_TRUE(unpack_call(full.data(), full.size(), a));
  ASSERT_TRUE(unpack_call(short_form.data(), short_form.size(), b));
  EXPECT_EQ(pack_call(a), pack_call(b)) << "the two forms unpack alike";
  EXPECT_EQ(b.hdr.type, uint32_t(INGERO_REC_CALL));
  EXPECT_EQ(b.hdr.stack_hash, 0x5eedu);
  EXPECT_EQ(b.caller, 0x7f00deadbeefu);
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(b, ev));
  EXPECT_EQ(ev.op, "cuLaunchKernel");
  EXPECT_FALSE(ev.timed);
  EXPECT_EQ(ev.comm_view(), "trainer");
  EXPECT_EQ(ev.get(Field::kFunc), 10u);
  EXPECT_EQ(ev.get(Field::kGridX), 11u);
  EXPECT_EQ(ev.get(Field::kBlockY), 15u);
  EXPECT_EQ(ev.get(Field::kBlockZ), 1u);
  EXPECT_EQ(ev.get(Field::kSharedMem), 512u);
  EXPECT_EQ(ev.get(Field::kStream), 0x5151u);
  // Cut anywhere, or of another type, it is malformed, never read past its end.
  for (size_t n = 0; n < short_form.size(); ++n)
    EXPECT_FALSE(unpack_call(short_form.data(), n, b)) << n;
  short_form[0] = 77;
  EXPECT_FALSE(unpack_call(short_form.data(), short_form.size(), b));
}

TEST_F(DecoderTest, MallocReadsOutputPointerAtReturn) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaMalloc");
  auto r = rec(id);
  r.hdr.ret = 0;
  r.regs[1] = 7168;
  uint64_t p = 0x7f0012340000;
  std::memcpy(r.return_buf, &p, 8);
  r.hdr.return_len = 8;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.get(Field::kBytes), 7168u);
  EXPECT_EQ(ev.get(Field::kDptr), p);
  // A faulted output read leaves the field absent rather than inventing zero.
  r.hdr.return_len = 0;
  r.hdr.flags |= INGERO_CALL_RETURN_READ_FAULT;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_FALSE(ev.has(Field::kDptr));
}

// A failed call wrote no output: what its return read finds is the caller's variable as it
// was (0xdeadbeef0 here), which was stored as the device pointer returned, and a failed
// ncclCommInitRank's stale handle as the communicator made.
TEST_F(DecoderTest, AFailedCallsOutputIsNotRead) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaMalloc");
  auto r = rec(id);
  r.hdr.ret = 2;  // cudaErrorMemoryAllocation
  r.regs[1] = 4096;
  uint64_t stale = 0xdeadbeef0;
  std::memcpy(r.return_buf, &stale, 8);
  r.hdr.return_len = 8;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.ret, 2);
  EXPECT_EQ(ev.get(Field::kBytes), 4096u);  // an argument: read whatever the answer
  EXPECT_FALSE(ev.has(Field::kDptr));
  r.hdr.ret = 0;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.get(Field::kDptr), stale);
}

TEST_F(DecoderTest, Memcpy2DMultipliesAndReadsKindFromStack) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaMemcpy2DAsync");
  auto r = rec(id);
  r.regs[4] = 64;
  r.regs[5] = 32;
  r.stack[0] = 2;  // cudaMemcpyDeviceToHost
  r.stack[1] = 0xabc;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.get(Field::kBytes), 2048u);
  EXPECT_EQ(direction_name(*ev.get(Field::kDirection)), "D2H");
  EXPECT_EQ(ev.get(Field::kStream), 0xabcu);
}

TEST_F(DecoderTest, DriverCopyDirectionIsImpliedByTheFunction) {
  uint32_t id = add("cuda_driver", backends::cuda::kDriverProbes, "cuMemcpyDtoHAsync");
  auto r = rec(id);
  r.regs[2] = 1000;
  r.regs[3] = 0x9;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_EQ(ev.get(Field::kDirection), uint64_t(CopyDirection::kDeviceToHost));
  EXPECT_EQ(ev.get(Field::kBytes), 1000u);
}

TEST_F(DecoderTest, UnfinishedCallHasNoReturnValueAndUnknownIdsAreRejected) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaStreamSynchronize");
  auto r = rec(id);
  r.hdr.flags |= INGERO_CALL_UNFINISHED;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_TRUE(ev.unfinished);
  EXPECT_FALSE(ev.has_ret);
  r.hdr.probe_id = 999;
  EXPECT_FALSE(CallDecoder(table_).decode(wire(r), ev));
}

TEST_F(DecoderTest, StackFaultDropsOnlyStackFields) {
  uint32_t id = add("cuda_runtime", backends::cuda::kRuntimeProbes, "cudaLaunchKernel");
  auto r = rec(id);
  r.regs[0] = 1;
  r.hdr.flags |= INGERO_CALL_STACK_READ_FAULT;
  Event ev;
  ASSERT_TRUE(CallDecoder(table_).decode(wire(r), ev));
  EXPECT_TRUE(ev.has(Field::kFunc));
  EXPECT_FALSE(ev.has(Field::kStream));
  EXPECT_FALSE(ev.has(Field::kSharedMem));
}

TEST(Recipes, MirrorTheSpec) {
  const auto& s = spec_named(backends::cuda::kRuntimeProbes, "cudaLaunchKernelExC");
  auto r = make_recipe(s);
  EXPECT_EQ(r.valid, 1);
  EXPECT_EQ(r.entry_read.src, INGERO_PTR_REG);
  EXPECT_EQ(r.entry_read.index, 0);
  EXPECT_EQ(r.entry_read.len, 40);
  EXPECT_EQ(r.return_read.src, INGERO_PTR_NONE);
  const auto& m = spec_named(backends::cuda::kRuntimeProbes, "cudaMalloc");
  auto rm = make_recipe(m);
  EXPECT_EQ(rm.return_read.src, INGERO_PTR_REG);
  EXPECT_EQ(rm.return_read.len, 8);
  EXPECT_EQ(make_recipe(spec_named(backends::cuda::kDriverProbes, "cuLaunchKernel")).stack_words,
            3);
}

// A launch of a library above another (the runtime's, layer 1) is marked so: the driver launch
// it makes is the same launch among the thread's for --launch-timing (bpf/call_paths.h). A
// driver's launch, and a call of another kind at any layer, are not.
TEST(Recipes, AnUpperLayersLaunchIsMarkedAsOne) {
  const auto& rt = spec_named(backends::cuda::kRuntimeProbes, "cudaLaunchKernel");
  const auto& drv = spec_named(backends::cuda::kDriverProbes, "cuLaunchKernel");
  const auto& sync = spec_named(backends::cuda::kRuntimeProbes, "cudaStreamSynchronize");
  const uint8_t launch = INGERO_RECIPE_ENTRY_ONLY | INGERO_RECIPE_CALLER | INGERO_RECIPE_SITE_ARG;
  EXPECT_EQ(make_recipe(rt, 1).flags, launch | INGERO_RECIPE_UPPER_LAYER);
  EXPECT_EQ(make_recipe(rt, 0).flags, launch);
  EXPECT_EQ(make_recipe(drv, 0).flags, launch);
  EXPECT_EQ(make_recipe(sync, 1).flags, 0);
}

// A launch keys its call site by its kernel too (bpf/stacks.bpf.c): the register that holds it,
// the first for cudaLaunchKernel and cuLaunchKernel, the second where the first is the launch's
// configuration. Other calls are keyed by their site alone.
TEST(Recipes, ALaunchKeysItsSiteByItsKernel) {
  struct Want {
    std::span<const ProbeSpec> probes;
    const char* symbol;
    int reg;
  };
  for (const Want& w : {Want{backends::cuda::kRuntimeProbes, "cudaLaunchKernel", 0},
                        Want{backends::cuda::kRuntimeProbes, "cudaLaunchKernelExC", 1},
                        Want{backends::cuda::kDriverProbes, "cuLaunchKernel", 0}}) {
    SCOPED_TRACE(w.symbol);
    ingero_recipe r = make_recipe(spec_named(w.probes, w.symbol));
    EXPECT_TRUE(r.flags & INGERO_RECIPE_SITE_ARG);
    EXPECT_EQ(r.name_question, w.reg);
  }
  ingero_recipe sync =
      make_recipe(spec_named(backends::cuda::kRuntimeProbes, "cudaStreamSynchronize"));
  EXPECT_FALSE(sync.flags & INGERO_RECIPE_SITE_ARG);
}

// A name look-up's repeats are held back in BPF by its answer and question (records_call.h,
// INGERO_NAME_ONCE); only one whose question alone fixes the answer skips its entry.
TEST(Recipes, NameLookUpsAreKeyedByTheirAnswerAndQuestion) {
  struct Want {
    std::span<const ProbeSpec> table;
    const char* symbol;
    uint8_t once, question;
  };
  const uint8_t once_ok = INGERO_NAME_ONCE | INGERO_NAME_NEEDS_ZERO;
  const Want wants[] = {
      {backends::cuda::kDriverProbes, "cuModuleGetFunction", once_ok, 2},
      {backends::cuda::kDriverProbes, "cuLibraryGetKernel", once_ok, 2},
      {backends::cuda::kDriverProbes, "cuKernelGetFunction", once_ok, 1},  // per context
      {backends::cuda::kDriverProbes, "cuFuncGetName", once_ok | INGERO_NAME_FIXED, 1},
      {backends::cuda::kDriverProbes, "cuKernelGetName", once_ok | INGERO_NAME_FIXED, 1},
      {backends::cuda::kRuntimeProbes, "__cudaGetKernel", once_ok | INGERO_NAME_FIXED, 1},
      {backends::cuda::kRuntimeProbes, "cudaGetKernel", once_ok | INGERO_NAME_FIXED, 1},
      {backends::cuda::kRuntimeProbes, "cudaLibraryGetKernel", once_ok, 2},
      {backends::hip::kHipProbes, "hipModuleGetFunction", once_ok, 2},
      {backends::hip::kHipProbes, "hipGetFuncBySymbol", once_ok, 1},  // the current device's
      {backends::hip::kHipProbes, "hipKernelNameRef",
       INGERO_NAME_ONCE | INGERO_NAME_ANSWER_RET | INGERO_NAME_FIXED, 0},
      // Registrations answer nothing: each is shipped.
      {backends::cuda::kRuntimeProbes, "__cudaRegisterFunction", 0, 0},
      {backends::hip::kHipProbes, "__hipRegisterFunction", 0, 0},
      {backends::cuda::kRuntimeProbes, "cudaLaunchKernel", 0, 0},
  };
  for (const Want& w : wants) {
    auto r = make_recipe(spec_named(w.table, w.symbol));
    EXPECT_EQ(r.name_once, w.once) << w.symbol;
    EXPECT_EQ(r.name_question, w.question) << w.symbol;
  }
}

}  // namespace
}  // namespace ingero::hal
