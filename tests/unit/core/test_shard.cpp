// Tests for src/data/shard.cpp: the byte layout, round trips, and a clear refusal for every kind
// of damaged or foreign file.
#include "data/shard.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/hash.hpp"
#include "test_support.hpp"

namespace faultline::data {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::write_file;

Shard sample_shard() {
  Shard shard;
  shard.name = "sample";
  shard.header.tokenizer = "byte";
  shard.header.tokenizer_version = 3;
  shard.header.vocab_size = 300;
  shard.tokens = {1, 0x0203, 299, 0};
  return shard;
}

// Header bytes before the tokens for tokenizer "byte": 8 + 4 + 4 + 4 + 4 + 4 + 8 + 8.
constexpr size_t kByteHeaderSize = 44;

TEST(Shard, LayoutIsLittleEndianByteForByte) {
  ScratchDir dir;
  std::string path = dir.file("a.flshard");
  write_shard(path, sample_shard());
  std::string bytes = read_file(path);
  ASSERT_EQ(bytes.size(), kByteHeaderSize + 2 * 4);
  EXPECT_EQ(bytes.substr(0, 8), std::string("FLSHARD\0", 8));
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\0\0\0", 4));   // format version
  EXPECT_EQ(bytes.substr(12, 4), std::string("\x04\0\0\0", 4));  // name length
  EXPECT_EQ(bytes.substr(16, 4), "byte");
  EXPECT_EQ(bytes.substr(20, 4), std::string("\x03\0\0\0", 4));          // tokenizer version
  EXPECT_EQ(bytes.substr(24, 4), std::string("\x2c\x01\0\0", 4));        // vocab 300
  EXPECT_EQ(bytes.substr(28, 8), std::string("\x04\0\0\0\0\0\0\0", 8));  // token count
  EXPECT_EQ(bytes.substr(44), std::string("\x01\0\x03\x02\x2b\x01\0\0", 8));
  const std::string payload = bytes.substr(44);
  uint64_t checksum = 0;
  for (int i = 7; i >= 0; --i)
    checksum = (checksum << 8) | static_cast<unsigned char>(bytes[36 + i]);
  EXPECT_EQ(checksum, hash_bytes(payload.data(), payload.size()));
}

TEST(Shard, ChecksumIsXxh64OfLittleEndianTokens) {
  const std::string bytes("\x01\0\x03\x02", 4);
  EXPECT_EQ(token_checksum({1, 0x0203}), hash_bytes(bytes.data(), bytes.size()));
  EXPECT_EQ(token_checksum({}), 0xEF46DB3751D8E999ULL);
  // Above one internal chunk, so chunked hashing is exercised too.
  std::vector<uint16_t> many(40000);
  std::string raw;
  for (size_t i = 0; i < many.size(); ++i) {
    many[i] = static_cast<uint16_t>(i * 7919);
    raw += static_cast<char>(many[i] & 0xFF);
    raw += static_cast<char>(many[i] >> 8);
  }
  EXPECT_EQ(token_checksum(many), hash_bytes(raw.data(), raw.size()));
}

TEST(Shard, RoundTripKeepsHeaderAndTokens) {
  ScratchDir dir;
  std::string path = dir.file("round-trip.flshard");
  write_shard(path, sample_shard());
  Shard back = read_shard(path);
  EXPECT_EQ(back.name, "round-trip");
  EXPECT_EQ(back.header.format_version, kShardFormatVersion);
  EXPECT_EQ(back.header.tokenizer, "byte");
  EXPECT_EQ(back.header.tokenizer_version, 3u);
  EXPECT_EQ(back.header.vocab_size, 300u);
  EXPECT_EQ(back.header.token_count, 4u);
  EXPECT_EQ(back.header.checksum, token_checksum(sample_shard().tokens));
  EXPECT_EQ(back.tokens, sample_shard().tokens);

  ShardHeader header = read_shard_header(path);
  EXPECT_EQ(header.token_count, 4u);
  EXPECT_EQ(header.checksum, back.header.checksum);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

TEST(Shard, EmptyShardRoundTrips) {
  ScratchDir dir;
  Shard empty = sample_shard();
  empty.tokens.clear();
  write_shard(dir.file("e.flshard"), empty);
  EXPECT_TRUE(read_shard(dir.file("e.flshard")).tokens.empty());
}

TEST(Shard, RefusesWrongMagic) {
  ScratchDir dir;
  std::string path = dir.file("text.flshard");
  write_file(path, "hello, this is not a shard at all, just some text");
  ErrorItem error = user_error([&] { read_shard(path); });
  EXPECT_NE(error.what.find("not a faultline shard"), std::string::npos) << error.what;
  EXPECT_EQ(error.where, path);
  EXPECT_NE(error.hint.find("faultline data"), std::string::npos) << error.hint;
  user_error([&] { read_shard_header(path); });
}

TEST(Shard, RefusesUnknownFormatVersion) {
  ScratchDir dir;
  std::string path = dir.file("v2.flshard");
  write_shard(path, sample_shard());
  std::string bytes = read_file(path);
  bytes[8] = 2;
  write_file(path, bytes);
  for (auto read : {+[](const std::string& p) { read_shard(p); },
                    +[](const std::string& p) { read_shard_header(p); }}) {
    ErrorItem error = user_error([&] { read(path); });
    EXPECT_NE(error.what.find("found 2, supported 1"), std::string::npos) << error.what;
    EXPECT_EQ(error.where, path);
    EXPECT_NE(error.hint.find("faultline data prepare"), std::string::npos) << error.hint;
  }
}

TEST(Shard, RefusesTruncatedTokens) {
  ScratchDir dir;
  std::string path = dir.file("cut.flshard");
  write_shard(path, sample_shard());
  std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, bytes.size() - 3));
  ErrorItem error = user_error([&] { read_shard(path); });
  EXPECT_NE(error.what.find("expected 4 tokens, found 2"), std::string::npos) << error.what;
  EXPECT_EQ(error.where, path);
  EXPECT_FALSE(error.hint.empty());
}

TEST(Shard, RefusesTruncatedHeader) {
  ScratchDir dir;
  std::string path = dir.file("short.flshard");
  write_shard(path, sample_shard());
  write_file(path, read_file(path).substr(0, 30));
  ErrorItem error = user_error([&] { read_shard_header(path); });
  EXPECT_NE(error.what.find("truncated"), std::string::npos) << error.what;
  EXPECT_EQ(error.where, path);
}

TEST(Shard, RefusesTrailingBytes) {
  ScratchDir dir;
  std::string path = dir.file("long.flshard");
  write_shard(path, sample_shard());
  write_file(path, read_file(path) + "xyz");
  ErrorItem error = user_error([&] { read_shard(path); });
  EXPECT_NE(error.what.find("3 unexpected bytes"), std::string::npos) << error.what;
}

TEST(Shard, RefusesChecksumMismatchUnlessIgnored) {
  ScratchDir dir;
  std::string path = dir.file("flipped.flshard");
  write_shard(path, sample_shard());
  std::string bytes = read_file(path);
  bytes[kByteHeaderSize] ^= 0x40;
  write_file(path, bytes);
  ErrorItem error = user_error([&] { read_shard(path); });
  std::string stored = hex64(token_checksum(sample_shard().tokens));
  EXPECT_NE(error.what.find("checksum mismatch: stored " + stored + ", computed "),
            std::string::npos)
      << error.what;
  EXPECT_EQ(error.where, path);
  EXPECT_FALSE(error.hint.empty());

  Shard damaged = read_shard(path, ChecksumPolicy::Ignore);
  EXPECT_EQ(damaged.tokens[0], 1 ^ 0x40);
  EXPECT_NE(token_checksum(damaged.tokens), damaged.header.checksum);
}

TEST(Shard, RefusesMissingFile) {
  ScratchDir dir;
  ErrorItem error = user_error([&] { read_shard(dir.file("absent.flshard")); });
  EXPECT_EQ(error.where, dir.file("absent.flshard"));
}

TEST(Shard, ListsDirectoryShardsSortedByName) {
  ScratchDir dir;
  for (const char* name : {"b.flshard", "a.flshard", "c.flshard"})
    write_shard(dir.file(name), sample_shard());
  write_file(dir.file("notes.txt"), "not a shard");
  write_file(dir.file("d.flshard.partial"), "half written");
  std::filesystem::create_directory(dir.file("sub.flshard"));
  EXPECT_EQ(list_shards(dir.path()),
            (std::vector<std::string>{dir.file("a.flshard"), dir.file("b.flshard"),
                                      dir.file("c.flshard")}));
  EXPECT_EQ(list_shards(dir.file("b.flshard")), std::vector<std::string>{dir.file("b.flshard")});
}

TEST(Shard, ListingMissingOrEmptyPathIsAnError) {
  ScratchDir dir;
  ErrorItem missing = user_error([&] { list_shards(dir.file("nowhere")); });
  EXPECT_NE(missing.what.find("does not exist"), std::string::npos);
  EXPECT_EQ(missing.where, dir.file("nowhere"));
  EXPECT_NE(missing.hint.find("faultline data synth"), std::string::npos);

  ErrorItem empty = user_error([&] { list_shards(dir.path()); });
  EXPECT_NE(empty.what.find("no shard files"), std::string::npos);
  EXPECT_EQ(empty.where, dir.path());
}

TEST(Shard, NumberedNamesSortInOrder) {
  EXPECT_EQ(numbered_shard_name("synth", 0), "synth-000");
  EXPECT_EQ(numbered_shard_name("prepare", 42), "prepare-042");
  EXPECT_LT(numbered_shard_name("synth", 99), numbered_shard_name("synth", 100));
}

}  // namespace
}  // namespace faultline::data
