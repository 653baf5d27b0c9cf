// ELF lookup against the real vendor libraries, checked against readelf, plus hostile files.
#include "hal/elf_symbols.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include "backends/cuda/cuda_backend.h"
#include "probe/probe_plan.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::hal {
namespace {

const char* kCudart = INGERO_CUDA_ROOT "/lib64/libcudart.so.13";
const char* kStub = INGERO_CUDA_ROOT "/lib64/stubs/libcuda.so";
const char* kNccl = INGERO_CUDA_ROOT "/lib64/libnccl.so.2";
const char* kHip = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
const char* kVerbs = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

// readelf's view of a dynamic symbol: "name@@VER" or "name@VER" -> value.
std::map<std::string, uint64_t> readelf_dynsyms(const std::string& path) {
  std::string out;
  test::run_command({"/usr/bin/readelf", "-W", "--dyn-syms", path}, &out);
  std::map<std::string, uint64_t> m;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(ls >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (type != "FUNC" || ndx == "UND") continue;
    m[name] = std::stoull(value, nullptr, 16);
  }
  return m;
}

// readelf's program headers: file offset of a virtual address.
uint64_t readelf_file_offset(const std::string& path, uint64_t vaddr) {
  std::string out;
  test::run_command({"/usr/bin/readelf", "-W", "-l", path}, &out);
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string type, off, va, pa, filesz;
    if (!(ls >> type >> off >> va >> pa >> filesz) || type != "LOAD") continue;
    uint64_t o = std::stoull(off, nullptr, 16), v = std::stoull(va, nullptr, 16),
             fs = std::stoull(filesz, nullptr, 16);
    if (vaddr >= v && vaddr < v + fs) return vaddr - v + o;
  }
  return ~0ull;
}

TEST(ElfSymbols, RuntimeSymbolsMatchReadelf) {
  REQUIRE_FILE(kCudart);
  auto idx = SymbolIndex::load(kCudart);
  ASSERT_TRUE(idx) << idx.error().message;
  auto re = readelf_dynsyms(kCudart);
  for (const char* name : {"cudaMalloc", "cudaLaunchKernel", "cudaStreamSynchronize",
                           "cudaMemcpyAsync_ptsz", "cudaGraphLaunch"}) {
    const ElfSymbol* s = (*idx)->find_function(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->value, re.at(std::string(name) + "@@libcudart.so.13")) << name;
    EXPECT_TRUE(s->default_version);
    EXPECT_EQ(s->version, "libcudart.so.13");
    EXPECT_EQ((*idx)->file_offset(s->value), readelf_file_offset(kCudart, s->value)) << name;
  }
  EXPECT_EQ((*idx)->soname(), "libcudart.so.13");
  EXPECT_EQ((*idx)->build_id().size(), 40u);
}

TEST(ElfSymbols, HipVersionedDefaultSymbol) {
  REQUIRE_FILE(kHip);
  auto idx = SymbolIndex::load(kHip);
  ASSERT_TRUE(idx) << idx.error().message;
  auto re = readelf_dynsyms(kHip);
  const ElfSymbol* s = (*idx)->find_function("hipMalloc");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->version, "hip_4.2");
  EXPECT_TRUE(s->default_version);
  EXPECT_EQ(s->value, re.at("hipMalloc@@hip_4.2"));
  const auto& vd = (*idx)->version_definitions();
  EXPECT_NE(std::find(vd.begin(), vd.end(), "hip_4.2"), vd.end());
}

TEST(ElfSymbols, IbverbsPicksDefaultVersionOverOlder) {
  REQUIRE_FILE(kVerbs);
  auto idx = SymbolIndex::load(kVerbs);
  ASSERT_TRUE(idx) << idx.error().message;
  auto re = readelf_dynsyms(kVerbs);
  // Two definitions: ibv_get_async_event@IBVERBS_1.0 (hidden) and @@IBVERBS_1.1 (default).
  ASSERT_TRUE(re.count("ibv_get_async_event@IBVERBS_1.0"));
  ASSERT_TRUE(re.count("ibv_get_async_event@@IBVERBS_1.1"));
  ASSERT_NE(re.at("ibv_get_async_event@IBVERBS_1.0"), re.at("ibv_get_async_event@@IBVERBS_1.1"));
  const ElfSymbol* s = (*idx)->find_function("ibv_get_async_event");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->version, "IBVERBS_1.1");
  EXPECT_EQ(s->value, re.at("ibv_get_async_event@@IBVERBS_1.1"));
  EXPECT_EQ((*idx)->file_offset(s->value), readelf_file_offset(kVerbs, s->value));
}

TEST(ElfSymbols, NcclWeakAliasAndProfilingName) {
  REQUIRE_FILE(kNccl);
  auto idx =
      SymbolIndex::load(kNccl, [](std::string_view n) { return n.find("AllReduce") != n.npos; });
  ASSERT_TRUE(idx) << idx.error().message;
  const ElfSymbol* weak = (*idx)->find_function("ncclAllReduce");
  const ElfSymbol* strong = (*idx)->find_function("pncclAllReduce");
  ASSERT_NE(weak, nullptr);
  ASSERT_NE(strong, nullptr);
  EXPECT_EQ(weak->value, strong->value);
  EXPECT_EQ(weak->bind, 2 /* STB_WEAK */);
  EXPECT_EQ(strong->bind, 1 /* STB_GLOBAL */);
  EXPECT_EQ(weak->value, readelf_dynsyms(kNccl).at("ncclAllReduce"));
}

TEST(ElfSymbols, DriverVariantsResolveToDistinctAddresses) {
  REQUIRE_FILE(kStub);
  auto idx = SymbolIndex::load(kStub);
  ASSERT_TRUE(idx) << idx.error().message;
  auto re = readelf_dynsyms(kStub);
  ProbeSpec launch{
      .symbol = "cuLaunchKernel", .kind = EventKind::kLaunch, .variants = kBase | kPtsz};
  auto found = resolve_spec(**idx, launch);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].first, "cuLaunchKernel");
  EXPECT_EQ(found[0].second->value, re.at("cuLaunchKernel"));
  EXPECT_EQ(found[1].first, "cuLaunchKernel_ptsz");
  EXPECT_EQ(found[1].second->value, re.at("cuLaunchKernel_ptsz"));
  // _v2 only: the 32-bit v1 cuMemAlloc is not attached.
  ProbeSpec alloc{.symbol = "cuMemAlloc", .kind = EventKind::kAlloc, .variants = kV2};
  auto a = resolve_spec(**idx, alloc);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].first, "cuMemAlloc_v2");
  EXPECT_EQ(a[0].second->value, re.at("cuMemAlloc_v2"));
  // A name that exists nowhere resolves to nothing, without error.
  ProbeSpec none{.symbol = "cuNoSuchFunction", .kind = EventKind::kSync};
  EXPECT_TRUE(resolve_spec(**idx, none).empty());
}

TEST(ElfSymbols, CudaBackendPlansEveryRuntimeAndDriverFunction) {
  REQUIRE_FILE(kCudart);
  REQUIRE_FILE(kStub);
  auto cuda = backends::make_cuda_backend();
  const VendorBackend* bs[] = {cuda.get()};
  for (auto [path, api, total] :
       {std::tuple{kCudart, "cuda_runtime", 30}, {kStub, "cuda_driver", 23}}) {
    auto idx = SymbolIndex::load(path);
    ASSERT_TRUE(idx);
    MappedFile f{path, path, "", idx->get(), false};
    f.basename = std::string_view(path).substr(std::string_view(path).rfind('/') + 1);
    auto plans = plan_file(f, bs);
    ASSERT_EQ(plans.size(), 1u) << path;
    EXPECT_EQ(plans[0].match.api, api);
    EXPECT_EQ(plans[0].specs_total, size_t(total));
    EXPECT_EQ(plans[0].specs_resolved, size_t(total)) << path;
    EXPECT_TRUE(plans[0].missing_required.empty());
    for (const auto& p : plans[0].probes)
      EXPECT_EQ(p.file_offset, readelf_file_offset(path, p.vaddr)) << p.symbol;
  }
}

class HostileFiles : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    std::string p = test::temp_path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

TEST_F(HostileFiles, NotElfEmptyTruncatedForeignAreClearErrors) {
  auto empty = SymbolIndex::load(write("empty", ""));
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos) << empty.error().message;
  auto text = SymbolIndex::load(write("text.so", "#!/bin/sh\necho not a library\n"));
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("not an ELF file"), std::string::npos)
      << text.error().message;
  auto missing = SymbolIndex::load("/nonexistent/libcudart.so.13");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("No such file"), std::string::npos);
  auto dir = SymbolIndex::load("/tmp");
  ASSERT_FALSE(dir);

  REQUIRE_FILE(kCudart);
  std::ifstream in(kCudart, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut :
       {size_t(16), size_t(64), size_t(700), size_t(4096), all.size() / 2, all.size() - 100}) {
    auto r = SymbolIndex::load(write("trunc" + std::to_string(cut), all.substr(0, cut)));
    EXPECT_FALSE(r) << "cut at " << cut;
    if (!r) {
      EXPECT_FALSE(r.error().message.empty());
    }
  }
  std::string arm = all;
  arm[18] = char(183);  // e_machine = EM_AARCH64
  arm[19] = 0;
  auto foreign = SymbolIndex::load(write("arm.so", arm));
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().message.find("another machine"), std::string::npos)
      << foreign.error().message;
  // Corrupted section headers: garbage over e_shoff.
  std::string bad = all;
  for (int i = 0; i < 8; ++i) bad[40 + i] = char(0xff);
  auto corrupt = SymbolIndex::load(write("corrupt.so", bad));
  EXPECT_FALSE(corrupt);
}

// A FIFO where a library is looked for (a junk CUDA_HOME): refused at once, where opening it
// blocked `check` for ever waiting for a writer.
TEST_F(HostileFiles, AFifoIsRefusedWithoutWaitingForAWriter) {
  std::string fifo = test::temp_path("libcudart.so.13");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto r = SymbolIndex::load(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, fifo + ": not a regular file");
}

TEST_F(HostileFiles, StrippedFileHasNoSymtabButDynsymStillResolves) {
  REQUIRE_FILE(kCudart);
  std::string out = test::temp_path("stripped.so");
  ASSERT_EQ(test::run_command({"/usr/bin/strip", "--strip-all", "-o", out, kCudart}), 0);
  auto idx = SymbolIndex::load(out);
  ASSERT_TRUE(idx) << idx.error().message;
  EXPECT_FALSE((*idx)->has_symtab());
  EXPECT_NE((*idx)->find_function("cudaMalloc"), nullptr);
}

}  // namespace
}  // namespace ingero::hal
