// compress/gzip.h, the one gzip of the tree (ClickHouse bodies, OTLP bodies, pprof files): what
// it writes is a gzip member any reader decodes to the same bytes, at every level; what it
// reads back whole or not at all.
#include "compress/gzip.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/subprocess.h"
#include "tests/support/trace_db.h"

namespace ingero::compress {
namespace {

std::string text(size_t n) {
  std::string s;
  for (size_t i = 0; s.size() < n; ++i) s += "node-1\t" + std::to_string(i % 977) + "\tcuda\n";
  s.resize(n);
  return s;
}

TEST(Gzip, RoundTripsAtEveryLevelAndEmptyInput) {
  std::string data = text(300'000);
  for (int level : {1, 6, 9}) {
    auto z = gzip(data, level);
    ASSERT_TRUE(z) << level;
    EXPECT_EQ(uint8_t((*z)[0]), 0x1f);  // the gzip magic
    EXPECT_EQ(uint8_t((*z)[1]), 0x8b);
    EXPECT_LT(z->size() * 8, data.size()) << level;
    auto back = gunzip(*z);
    ASSERT_TRUE(back) << level;
    EXPECT_EQ(*back, data) << level;
  }
  auto empty = gzip("");
  ASSERT_TRUE(empty);
  auto back = gunzip(*empty);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, "");
}

TEST(Gzip, TruncatedOrCorruptInputIsAnErrorNeverAShorterOutput) {
  auto z = gzip(text(100'000));
  ASSERT_TRUE(z);
  auto cut = gunzip(z->substr(0, z->size() / 2));
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().message, "gunzip: truncated input");
  std::string bad = *z;
  bad[3] = char(0xff);  // reserved header flags set
  auto corrupt = gunzip(bad);
  ASSERT_FALSE(corrupt);
  EXPECT_EQ(corrupt.error().message.rfind("gunzip: corrupt input", 0), 0u)
      << corrupt.error().message;
}

TEST(Gzip, TheSystemGzipReadsWhatItWrites) {
  std::string data = text(50'000);
  auto z = gzip(data, 1);
  ASSERT_TRUE(z);
  std::string path = test::temp_path("gzip-test.gz");
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fwrite(z->data(), 1, z->size(), f), z->size());
  fclose(f);
  std::string out, err;
  EXPECT_EQ(test::run_command({"/usr/bin/gzip", "-dc", path}, &out, &err), 0) << err;
  EXPECT_EQ(out, data);
}

}  // namespace
}  // namespace ingero::compress
