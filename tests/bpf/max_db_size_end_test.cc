// --max-db-size at the session's end (cli.md: "at the end under S before the file is closed").
// Found by a hostile-testing helper: 40 short processes, each with its own causal chains, ended
// at 1.2 MiB with S = 1 MiB and nothing deleted: the chains and the session's end were written
// after the last pass.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_paths.h"
#include "tests/support/trace_db.h"

namespace ingero::test {
namespace {

TEST(MaxDbSizeEnd, TheChainsWrittenAtTheEndStayWithinTheLimit) {
  REQUIRE_BPF();
  REQUIRE_FILE(INGERO_CUDA_CALLS);
  const std::string db = temp_path("capped-end.db");
  const std::string loop = std::string("for i in $(seq 40); do ") + INGERO_CUDA_CALLS + " " +
                           INGERO_CUDA_ROOT "/lib64/stubs/libcuda.so 20 > /dev/null; done";
  auto run = trace_command(db, {"/bin/sh", "-c", loop}, {"--max-db-size", "1MiB", "--no-stack"});
  ASSERT_EQ(run.rc, 0) << run.err;
  ASSERT_GT(query_int(db, "SELECT count(*) FROM causal_chains"), 40) << run.err;
  EXPECT_FALSE(std::filesystem::exists(db + "-wal"));
  EXPECT_LE(std::filesystem::file_size(db), 1u << 20) << run.err;
}

}  // namespace
}  // namespace ingero::test
