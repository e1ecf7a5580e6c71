// Tests for src/data/tokenizer.cpp: the byte tokenizer is the identity on bytes.
#include "data/tokenizer.hpp"

#include <gtest/gtest.h>

namespace faultline::data {
namespace {

TEST(ByteTokenizer, EncodesBytesAsUnsignedIds) {
  EXPECT_EQ(byte_encode("A\n"), (std::vector<uint16_t>{65, 10}));
  EXPECT_EQ(byte_encode(std::string("\xff\x80\0", 3)), (std::vector<uint16_t>{255, 128, 0}));
  EXPECT_TRUE(byte_encode("").empty());
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::vector<uint16_t> tokens = byte_encode(all);
  ASSERT_EQ(tokens.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[b], b);
  EXPECT_EQ(byte_decode(tokens), all);
}

TEST(ByteTokenizer, DecodesIdsOutsideTheByteRangeAsReplacementCharacter) {
  EXPECT_EQ(byte_decode({104, 256, 105, 65535}), "h\xEF\xBF\xBDi\xEF\xBF\xBD");
}

TEST(ByteTokenizer, DescribesItself) {
  EXPECT_STREQ(kByteTokenizer, "byte");
  EXPECT_EQ(kByteVocabSize, 256u);
}

}  // namespace
}  // namespace faultline::data
