// Tests for src/common/hash.cpp: XXH64 against the reference vectors, streaming in any pieces.
#include "common/hash.hpp"

#include <gtest/gtest.h>

#include <string>

namespace faultline {
namespace {

TEST(Hash, MatchesReferenceVectors) {
  EXPECT_EQ(hash_bytes("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(hash_text("a"), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(hash_text("abc"), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(Hasher().digest(), 0xEF46DB3751D8E999ULL);
}

TEST(Hash, SeedChangesTheDigest) {
  EXPECT_NE(hash_bytes("abc", 3, 1), hash_bytes("abc", 3, 0));
  Hasher seeded(1);
  seeded.update("abc");
  EXPECT_EQ(seeded.digest(), hash_bytes("abc", 3, 1));
}

TEST(Hash, StreamingInPiecesEqualsOneShot) {
  // 100 bytes crosses the 32-byte stripe several times; every split point and a byte-wise feed.
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>((i * 37 + 11) & 0xFF);
  for (size_t length : {0u, 1u, 31u, 32u, 33u, 64u, 100u}) {
    const uint64_t expected = hash_bytes(text.data(), length);
    for (size_t split = 0; split <= length; ++split) {
      Hasher hasher;
      hasher.update(text.data(), split);
      hasher.update(text.data() + split, length - split);
      EXPECT_EQ(hasher.digest(), expected) << "length " << length << " split " << split;
    }
    Hasher bytewise;
    for (size_t i = 0; i < length; ++i) bytewise.update(text.data() + i, 1);
    EXPECT_EQ(bytewise.digest(), expected) << "length " << length;
  }
}

TEST(Hash, DigestDoesNotEndTheStream) {
  Hasher hasher;
  hasher.update("ab");
  EXPECT_EQ(hasher.digest(), hash_text("ab"));
  hasher.update("c");
  EXPECT_EQ(hasher.digest(), hash_text("abc"));
}

TEST(Hash, Hex64IsSixteenLowerCaseDigits) {
  EXPECT_EQ(hex64(0), "0000000000000000");
  EXPECT_EQ(hex64(0xEF46DB3751D8E999ULL), "ef46db3751d8e999");
}

}  // namespace
}  // namespace faultline
