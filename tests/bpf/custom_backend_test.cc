// The add-a-backend claim, proven: a backend for a runtime ingero has never heard of, in a
// handful of lines, registered in a test-only registry; no change to hal/, engine/ or bpf/.
#include <gtest/gtest.h>

#include "app/tracer.h"
#include "hal/backend.h"
#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

using namespace ingero::hal;

// --- the whole backend ------------------------------------------------------------------
constexpr ProbeSpec kFakeRt[] = {
    {.symbol = "fakeAlloc", .kind = EventKind::kAlloc, .fields = {{Field::kBytes, reg(0)}}},
    {.symbol = "fakeSync", .kind = EventKind::kSync, .fields = {{Field::kStream, reg(0)}}},
};
struct FakeRtBackend final : VendorBackend {
  std::string_view name() const override { return "fakert"; }
  std::vector<std::string_view> file_hints() const override { return {"libfakert"}; }
  std::vector<std::string> install_dirs(
      const std::function<std::string(const char*)>& env) const override {
    return {env("FAKERT_HOME")};
  }
  std::vector<LibraryMatch> match(const MappedFile& f) const override {
    return basename_matches(f.basename, "libfakert")
               ? std::vector<LibraryMatch>{{.vendor = "acme", .api = "fakert"}}
               : std::vector<LibraryMatch>{};
  }
  std::span<const ProbeSpec> probes(const LibraryMatch&) const override { return kFakeRt; }
  std::vector<std::span<const ProbeSpec>> tables() const override { return {kFakeRt}; }
  void decode(const RawCall&, const ProbeSpec&, Event&) const override {}
};
// -----------------------------------------------------------------------------------------

TEST(CustomBackend, RegisteredBackendIsTracedEndToEnd) {
  REQUIRE_BPF();
  std::string dir = std::string(INGERO_FAKE_RT).substr(0, std::string(INGERO_FAKE_RT).rfind('/'));
  setenv("FAKERT_HOME", dir.c_str(), 1);
  BackendRegistry registry;
  registry.add(std::make_unique<FakeRtBackend>());
  app::TraceOptions o;
  o.db_path = temp_path("custom.db");
  o.command = {INGERO_CALL_LOOP, INGERO_FAKE_RT, "fakeSync", "250"};
  o.quiet = true;
  o.live = false;
  ASSERT_EQ(app::run_trace(o, registry), 0);
  auto rows = query_rows(
      o.db_path,
      "SELECT vendor, api, kind, op, count(*), min(stream), max(ret) FROM calls GROUP BY 1,2,3,4");
  EXPECT_EQ(rows, (std::vector<std::vector<std::string>>{
                      {"acme", "fakert", "sync", "fakeSync", "250", "1", "0"}}));
  EXPECT_EQ(
      query_rows(
          o.db_path,
          "SELECT backend, specs_resolved, specs_total FROM libraries WHERE api = 'fakert'")[0],
      (std::vector<std::string>{"fakert", "2", "2"}));
}

}  // namespace
}  // namespace ingero::test
