// Tokenized shard files: a versioned binary format (magic, format version, tokenizer name and
// version, vocab size, token count, checksum) followed by little-endian uint16 token ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::data {

constexpr uint32_t kShardFormatVersion = 1;
constexpr char kShardExtension[] = ".flshard";

struct ShardHeader {
  uint32_t format_version = kShardFormatVersion;
  std::string tokenizer;           // e.g. "byte" or "synth-ngram"
  uint32_t tokenizer_version = 1;  // bumped whenever the tokenizer's mapping changes
  uint32_t vocab_size = 0;         // ids are < vocab_size by the producer's promise
  uint64_t token_count = 0;
  uint64_t checksum = 0;  // XXH64 of the token bytes
};

struct Shard {
  std::string name;  // file name without extension, or a synthetic name ("synth-000")
  ShardHeader header;
  std::vector<uint16_t> tokens;
};

// Whether read_shard compares the stored checksum with the tokens. Ignore exists so that
// `data inspect` can still show a damaged shard and mark it BAD instead of stopping at it.
enum class ChecksumPolicy { Verify, Ignore };

// XXH64 of the tokens as stored on disk (little-endian uint16), independent of host byte order.
uint64_t token_checksum(const std::vector<uint16_t>& tokens);

// Writes header + tokens; computes token_count and checksum. Throws UserError on I/O failure.
void write_shard(const std::string& path, const Shard& shard);

// Reads and verifies magic, format version and checksum. Throws UserError naming the file,
// what is wrong, and what would be valid.
Shard read_shard(const std::string& path);
Shard read_shard(const std::string& path, ChecksumPolicy policy);

// Reads only the header (for `data inspect` and quick checks); verifies magic and version.
ShardHeader read_shard_header(const std::string& path);

// "<prefix>-<index, 3+ digits>", e.g. "synth-000": the naming rule of generated shards, so that
// sorting by name keeps generation order up to 1000 shards.
std::string numbered_shard_name(const std::string& prefix, uint32_t index);

// The shard files of a path: the file itself, or the *.flshard files of a directory sorted by
// name. Throws UserError when there are none.
std::vector<std::string> list_shards(const std::string& path);

}  // namespace faultline::data
