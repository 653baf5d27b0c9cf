#include "backends/nccl/nccl_backend.h"

#include <cstring>

#include "backends/nccl/nccl_probes.h"

namespace ingero::backends {
namespace {

using namespace ingero::hal;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The original implementation's collective view: its op names (ALL_REDUCE, ...) and decoded
// datatype and reduce-op names.
constexpr SqlView kViews[] = {
    {.name = "nccl_events",
     .select = R"SQL(SELECT c.id, c.node, c.ts_ns AS timestamp_ns, c.dur_ns AS duration_ns,
       CASE c.op WHEN 'ncclAllReduce' THEN 'ALL_REDUCE' WHEN 'ncclAllGather' THEN 'ALL_GATHER'
         WHEN 'ncclReduceScatter' THEN 'REDUCE_SCATTER' WHEN 'ncclBroadcast' THEN 'BROADCAST'
         WHEN 'ncclBcast' THEN 'BROADCAST' WHEN 'ncclReduce' THEN 'REDUCE'
         WHEN 'ncclAllToAll' THEN 'ALL_TO_ALL' WHEN 'ncclAlltoAll' THEN 'ALL_TO_ALL'
         WHEN 'ncclSend' THEN 'SEND'
         WHEN 'ncclRecv' THEN 'RECV' WHEN 'ncclGroupStart' THEN 'GROUP_START'
         WHEN 'ncclGroupEnd' THEN 'GROUP_END' WHEN 'ncclCommInitRank' THEN 'COMM_INIT'
         WHEN 'ncclCommInitRankConfig' THEN 'COMM_INIT' WHEN 'ncclCommInitAll' THEN 'COMM_INIT'
         WHEN 'ncclCommSplit' THEN 'COMM_SPLIT' WHEN 'ncclCommDestroy' THEN 'COMM_DESTROY'
         WHEN 'ncclCommAbort' THEN 'COMM_ABORT' ELSE upper(c.op) END AS op,
       c.op AS api_op, c.vendor, c.api, c.rank, c.nranks, c.comm_hash AS comm_id_hash,
       c.communicator, c.pid, c.tid, c.comm, c.count, c.bytes,
       CASE c.datatype WHEN 0 THEN 'int8' WHEN 1 THEN 'uint8' WHEN 2 THEN 'int32'
         WHEN 3 THEN 'uint32' WHEN 4 THEN 'int64' WHEN 5 THEN 'uint64' WHEN 6 THEN 'float16'
         WHEN 7 THEN 'float32' WHEN 8 THEN 'float64' WHEN 9 THEN 'bfloat16'
         WHEN 10 THEN 'float8e4m3' WHEN 11 THEN 'float8e5m2' END AS datatype,
       CASE c.reduce_op WHEN 0 THEN 'sum' WHEN 1 THEN 'prod' WHEN 2 THEN 'max'
         WHEN 3 THEN 'min' WHEN 4 THEN 'avg' END AS reduce_op,
       c.peer, c.stream, c.ret, c.status, c.off_cpu_ns, c.cgroup_id
  FROM calls c WHERE c.api IN ('nccl', 'rccl'))SQL"},
};

// ncclResult_t, which RCCL shares, sorted by code (hal/error_codes.h). ncclInProgress is a
// nonblocking communicator's call still under way, not a failure.
constexpr ErrorCodeEntry kErrors[] = {
    {1, "ncclUnhandledCudaError", ErrorClass::kOther},
    {2, "ncclSystemError", ErrorClass::kOther},
    {3, "ncclInternalError", ErrorClass::kOther},
    {4, "ncclInvalidArgument", ErrorClass::kInvalid},
    {5, "ncclInvalidUsage", ErrorClass::kInvalid},
    {6, "ncclRemoteError", ErrorClass::kOther},
    {7, "ncclInProgress", ErrorClass::kNotReady},
};

class NcclBackend final : public VendorBackend {
 public:
  std::string_view name() const override { return "nccl"; }
  std::vector<std::string_view> file_hints() const override {
    // PyTorch wheels may link NCCL statically into these.
    return {"libnccl", "librccl", "libtorch_cuda", "libtorch_global_deps", "libtorch_hip"};
  }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>& getenv) const override {
    std::vector<std::string> dirs = {"/usr/local/cuda*/lib64", "/usr/local/cuda*/lib",
                                     "/opt/rocm*/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"};
    for (const char* var : {"CUDA_HOME", "NCCL_HOME", "ROCM_PATH"}) {
      std::string v = getenv(var);
      if (!v.empty()) {
        dirs.push_back(v + "/lib");
        dirs.push_back(v + "/lib64");
      }
    }
    for (const char* root :
         {"/usr/local/lib/python3*/dist-packages", "/usr/lib/python3/dist-packages",
          "/root/.local/lib/python3*/site-packages"}) {
      dirs.push_back(std::string(root) + "/nvidia/nccl/lib");
      dirs.push_back(std::string(root) + "/torch/lib");
    }
    std::string venv = getenv("VIRTUAL_ENV");
    if (!venv.empty()) dirs.push_back(venv + "/lib/python3*/site-packages/nvidia/nccl/lib");
    return dirs;
  }
  std::vector<LibraryMatch> match(const MappedFile& f) const override {
    if (basename_matches(f.basename, "libnccl")) return {{.vendor = "nvidia", .api = "nccl"}};
    if (basename_matches(f.basename, "librccl")) return {{.vendor = "amd", .api = "rccl"}};
    // A static copy inside a host object: pncclAllReduce is NCCL's own definition.
    const ElfSymbol* s = f.symbols->find_function("pncclAllReduce");
    if (!s) s = f.symbols->find_function("ncclAllReduce");
    if (s && f.symbols->find_function("ncclCommInitRank")) {
      bool amd = f.basename.find("hip") != std::string_view::npos ||
                 f.basename.find("rccl") != std::string_view::npos;
      return {{amd ? "amd" : "nvidia", amd ? "rccl" : "nccl", 0, true}};
    }
    return {};
  }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override {
    return nccl::kNcclProbes;
  }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {nccl::kNcclProbes}; }
  std::span<const SqlView> views() const override { return kViews; }
  void decode(const RawCall& call, const ProbeSpec& spec, Event& ev) const override {
    if (auto n = ev.get(Field::kCount), t = ev.get(Field::kDatatype); n && t) {
      if (uint64_t sz = nccl_datatype_size(*t)) ev.set(Field::kBytes, *n * sz);
    }
    if (spec.kind == EventKind::kCommInit && call.entry_bytes().size() == 128)
      ev.set(Field::kCommHash, nccl_comm_hash(call.entry_bytes()));
    if (ev.has_ret && ev.ret != 0) {
      auto code = find_error_code(kErrors, ev.ret);
      ev.set(Field::kErrClass, uint64_t(code ? code->cls : ErrorClass::kOther));
    }
  }
  std::optional<ErrorCode> error_code(std::string_view api, int64_t ret) const override {
    if (api != "nccl" && api != "rccl") return std::nullopt;
    return find_error_code(kErrors, ret);
  }
};

}  // namespace

uint64_t nccl_comm_hash(std::span<const uint8_t> id) {
  uint64_t h = 0;
  for (size_t off = 0; off + 8 <= id.size(); off += 8) {
    uint64_t w;
    std::memcpy(&w, id.data() + off, 8);
    h = splitmix64(h ^ w);
  }
  return h;
}

uint64_t nccl_datatype_size(uint64_t t) {
  // ncclInt8, Uint8, Int32, Uint32, Int64, Uint64, Float16, Float32, Float64, Bfloat16,
  // Float8e4m3, Float8e5m2.
  static constexpr uint64_t kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return t < std::size(kSizes) ? kSizes[t] : 0;
}

std::unique_ptr<VendorBackend> make_nccl_backend() { return std::make_unique<NcclBackend>(); }

}  // namespace ingero::backends
