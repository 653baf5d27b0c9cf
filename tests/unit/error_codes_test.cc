// The backends' return codes (hal/error_codes.h): their tables against the vendors' own
// libraries, which name every code they know, and what decoding a failed call stores.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "app/builtin_backends.h"
#include "backends/cuda/cuda_errors.h"
#include "fleet/clickhouse_source.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero {
namespace {

using hal::ErrorClass;

// The vendor library at `path`, or the test stops: skipped loudly, failed under CI=true (the
// machine has the real libraries).
#define OPEN_VENDOR_LIBRARY(handle, path)                                            \
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);                                \
  if (!handle) {                                                                     \
    if (test::running_in_ci()) FAIL() << "CI=true but " << path << " is missing";    \
    GTEST_SKIP() << "*** SKIPPED (not CI): " << path << ": " << dlerror() << " ***"; \
  }

void expect_sorted(std::span<const hal::ErrorCodeEntry> table) {
  for (size_t i = 1; i < table.size(); ++i) EXPECT_LT(table[i - 1].code, table[i].code) << i;
  for (const auto& e : table) {
    auto found = hal::find_error_code(table, e.code);
    ASSERT_TRUE(found) << e.code;
    EXPECT_EQ(found->name, e.name);
  }
}

TEST(ErrorCodes, TablesAreSortedAndFindEveryCodeTheyHold) {
  expect_sorted(backends::cuda::kRuntimeErrors);
  expect_sorted(backends::cuda::kDriverErrors);
  EXPECT_FALSE(hal::find_error_code(backends::cuda::kRuntimeErrors, 0));
  EXPECT_FALSE(hal::find_error_code(backends::cuda::kRuntimeErrors, 12345));
  EXPECT_FALSE(hal::find_error_code(backends::cuda::kRuntimeErrors, -1));
}

// Every name of the runtime's table is the one the installed libcudart gives its code.
TEST(ErrorCodes, TheRuntimesNamesAreThoseOfTheInstalledLibcudart) {
  OPEN_VENDOR_LIBRARY(h, INGERO_CUDA_ROOT "/lib64/libcudart.so.13");
  using NameFn = const char* (*)(int);
  auto name_of = reinterpret_cast<NameFn>(dlsym(h, "cudaGetErrorName"));
  ASSERT_NE(name_of, nullptr);
  for (const auto& e : backends::cuda::kRuntimeErrors)
    EXPECT_EQ(std::string(name_of(int(e.code))), e.name) << e.code;
  dlclose(h);
}

// And HIP's, those of the installed libamdhip64.
TEST(ErrorCodes, HipsNamesAreThoseOfTheInstalledLibamdhip64) {
  OPEN_VENDOR_LIBRARY(h, "libamdhip64.so.5");
  using NameFn = const char* (*)(int);
  auto name_of = reinterpret_cast<NameFn>(dlsym(h, "hipGetErrorName"));
  ASSERT_NE(name_of, nullptr);
  hal::BackendRegistry r;
  app::register_builtin_backends(r);
  int named = 0;
  for (int code = 1; code < 1100; ++code) {
    auto c = r.error_code("hip", code);
    if (!c) continue;
    ++named;
    EXPECT_EQ(std::string(name_of(code)), c->name) << code;
  }
  EXPECT_EQ(named, 43);
  dlclose(h);
}

TEST(ErrorCodes, TheRegistryNamesEachApisCodesAndClassesThem) {
  hal::BackendRegistry r;
  app::register_builtin_backends(r);
  auto expect = [&](std::string_view api, int64_t ret, std::string_view name, ErrorClass cls) {
    auto c = r.error_code(api, ret);
    ASSERT_TRUE(c) << api << " " << ret;
    EXPECT_EQ(c->name, name);
    EXPECT_EQ(c->cls, cls) << name;
  };
  expect("cuda_runtime", 35, "cudaErrorInsufficientDriver", ErrorClass::kNoDevice);
  expect("cuda_runtime", 700, "cudaErrorIllegalAddress", ErrorClass::kDeviceFault);
  expect("cuda_runtime", 600, "cudaErrorNotReady", ErrorClass::kNotReady);
  expect("cuda_runtime", 2, "cudaErrorMemoryAllocation", ErrorClass::kOutOfMemory);
  expect("cuda_driver", 34, "CUDA_ERROR_STUB_LIBRARY", ErrorClass::kNoDevice);
  expect("cuda_driver", 719, "CUDA_ERROR_LAUNCH_FAILED", ErrorClass::kDeviceFault);
  expect("hip", 700, "hipErrorIllegalAddress", ErrorClass::kDeviceFault);
  // libamdhip64's answer to every call without a usable GPU (CUDA's 101 stays invalid).
  expect("hip", 101, "hipErrorInvalidDevice", ErrorClass::kNoDevice);
  expect("cuda_runtime", 101, "cudaErrorInvalidDevice", ErrorClass::kInvalid);
  expect("nccl", 7, "ncclInProgress", ErrorClass::kNotReady);
  expect("rccl", 5, "ncclInvalidUsage", ErrorClass::kInvalid);
  EXPECT_FALSE(r.error_code("rdma", 12));
  EXPECT_FALSE(r.error_code("cuda_runtime", 4242));
  // The function the trace readers are given answers the same.
  auto fn = app::builtin_error_codes();
  ASSERT_TRUE(fn("cuda_driver", 100));
  EXPECT_EQ(fn("cuda_driver", 100)->name, "CUDA_ERROR_NO_DEVICE");
}

// The fleet's source names codes once given the backends' tables; no server is needed to ask.
TEST(ErrorCodes, TheClickHouseSourceNamesCodesOnceGivenThem) {
  fleet::Endpoint ep{
      .base = "http://127.0.0.1:1", .database = "ingero", .user = "", .password = ""};
  fleet::ClickHouseTraceSource src(std::make_unique<fleet::ClickHouseClient>(ep));
  EXPECT_FALSE(src.error_code("cuda_runtime", 700));
  src.name_errors_with(app::builtin_error_codes());
  auto c = src.error_code("cuda_runtime", 700);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->name, "cudaErrorIllegalAddress");
}

// Decoding a failed call stores its class (calls.err_class); an unknown code is "other".
TEST(ErrorCodes, DecodingAFailedCallStoresItsClass) {
  hal::BackendRegistry r;
  app::register_builtin_backends(r);
  const hal::VendorBackend* cuda = r.find("cuda");
  ASSERT_NE(cuda, nullptr);
  auto class_of = [&](std::string_view api, int64_t ret) {
    hal::CallRecord rec{};
    hal::RawCall raw(rec);
    hal::ProbeSpec spec{};
    hal::Event ev;
    ev.api = api;
    ev.ret = ret;
    ev.has_ret = true;
    cuda->decode(raw, spec, ev);
    return ev.get(hal::Field::kErrClass);
  };
  EXPECT_EQ(class_of("cuda_runtime", 0), std::nullopt);
  EXPECT_EQ(class_of("cuda_runtime", 700), uint64_t(ErrorClass::kDeviceFault));
  EXPECT_EQ(class_of("cuda_driver", 600), uint64_t(ErrorClass::kNotReady));
  EXPECT_EQ(class_of("cuda_driver", 2), uint64_t(ErrorClass::kOutOfMemory));
  EXPECT_EQ(class_of("cuda_runtime", 4242), uint64_t(ErrorClass::kOther));
}

}  // namespace
}  // namespace ingero
