#include "probe/proc_maps.h"

#include <gtest/gtest.h>

#include "probe/ld_cache.h"
#include "tests/support/trace_db.h"

namespace ingero::hal {
namespace {

TEST(ProcMaps, ParsesFileAnonymousDeletedAndSpacedPaths) {
  const char* text =
      "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234                       "
      "/usr/bin/python3.11\n"
      "7f3a00000000-7f3a00100000 r-xp 00028000 fd:01 98765                      /opt/my "
      "libs/libcudart.so.13\n"
      "7f3a00200000-7f3a00300000 rw-p 00000000 00:00 0 \n"
      "7f3a00400000-7f3a00500000 r-xp 00001000 08:02 555                        /tmp/libx.so "
      "(deleted)\n"
      "garbage line\n"
      "7ffd1000-7ffd2000 r-xp 00000000 00:00 0                                  [vdso]";
  auto m = parse_proc_maps(text);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].start, 0x55d0c0a00000u);
  EXPECT_EQ(m[0].path, "/usr/bin/python3.11");
  EXPECT_FALSE(m[0].executable());
  EXPECT_EQ(m[1].path, "/opt/my libs/libcudart.so.13");
  EXPECT_TRUE(m[1].executable());
  EXPECT_EQ(m[1].offset, 0x28000u);
  EXPECT_EQ(m[1].dev_major, 0xfdu);
  EXPECT_EQ(m[1].inode, 98765u);
  EXPECT_EQ(m[2].path, "");
  EXPECT_TRUE(m[3].deleted);
  EXPECT_EQ(m[3].path, "/tmp/libx.so");
  EXPECT_EQ(m[4].path, "[vdso]");
}

TEST(LdCache, ParsesTheHostCache) {
  REQUIRE_FILE("/etc/ld.so.cache");
  LocalHost host;
  auto bytes = host.read_text("/etc/ld.so.cache");
  ASSERT_TRUE(bytes);
  auto entries = parse_ld_cache(*bytes);
  ASSERT_TRUE(entries) << entries.error().message;
  bool libc = false;
  for (const auto& e : *entries)
    libc |= e.soname == "libc.so.6" && e.path.find("libc.so.6") != std::string::npos;
  EXPECT_TRUE(libc);
}

TEST(LdCache, ForeignAndTruncatedCachesAreErrors) {
  EXPECT_FALSE(parse_ld_cache("definitely not a cache"));
  std::string hdr = "glibc-ld.so.cache1.1";
  hdr += std::string(8, '\0');
  EXPECT_FALSE(parse_ld_cache(hdr));  // shorter than the header
  std::string big = "glibc-ld.so.cache1.1";
  big += std::string("\xff\xff\x00\x00", 4) + std::string(40, '\0');
  auto r = parse_ld_cache(big);  // claims 65535 entries in 48 bytes
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace ingero::hal
