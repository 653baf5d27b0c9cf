// hal/utf8.h: what is well-formed UTF-8 (Unicode table 3-7), and each byte of anything else as
// U+FFFD.
#include "hal/utf8.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace ingero::hal {
namespace {

const std::string kBad = "\xEF\xBF\xBD";

TEST(Utf8, WellFormedTextIsKeptAsItIs) {
  for (std::string s : std::initializer_list<std::string>{
           "", "train.py", "caf\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x9A\x80", "\xF4\x8F\xBF\xBF",
           std::string("nul\0in", 6)}) {
    EXPECT_TRUE(is_utf8(s)) << s;
    EXPECT_EQ(valid_utf8(s), s);
  }
}

TEST(Utf8, EachByteOfAnIllFormedSequenceBecomesOneReplacement) {
  EXPECT_EQ(valid_utf8("\xFF\xFE"
                       "bad"),
            kBad + kBad + "bad");
  EXPECT_EQ(valid_utf8("caf\xE9"), "caf" + kBad);                        // Latin-1
  EXPECT_EQ(valid_utf8("\xC0\xAF"), kBad + kBad);                        // overlong '/'
  EXPECT_EQ(valid_utf8("\xE0\x80\xAF"), kBad + kBad + kBad);             // overlong
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kBad + kBad + kBad);             // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), kBad + kBad + kBad + kBad);  // past U+10FFFF
  EXPECT_EQ(valid_utf8("a\xE2\x82"), "a" + kBad + kBad);                 // cut short
  EXPECT_EQ(valid_utf8("\x80"
                       "x"),
            kBad + "x");  // a lone continuation
  for (const char* s : {"\xFF", "caf\xE9", "\xC0\xAF", "\xED\xA0\x80", "a\xE2\x82"})
    EXPECT_FALSE(is_utf8(s)) << s;
}

}  // namespace
}  // namespace ingero::hal
