// Reading and writing .flshard files: byte-exact little-endian encoding, so a shard written on
// one machine reads back identically on any other, and every defect is reported, never guessed.
#include "data/shard.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/error.hpp"
#include "common/hash.hpp"

namespace faultline::data {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'F', 'L', 'S', 'H', 'A', 'R', 'D', '\0'};
// A tokenizer name is a short identifier; a longer length field means a damaged header, and
// trusting it would mean allocating whatever the corrupt bytes say.
constexpr uint32_t kMaxTokenizerName = 256;
// Tokens are hashed and encoded in chunks so neither needs a second full copy of a shard.
constexpr size_t kChunkTokens = 1 << 14;

const char kRegenerateHint[] =
    "re-create it with `faultline data prepare` or `faultline data synth`";

void put_u32(std::string& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

void put_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

void encode_tokens(const uint16_t* tokens, size_t count, unsigned char* out) {
  for (size_t i = 0; i < count; ++i) {
    out[2 * i] = static_cast<unsigned char>(tokens[i] & 0xFF);
    out[2 * i + 1] = static_cast<unsigned char>(tokens[i] >> 8);
  }
}

// Reads fixed-size little-endian fields and turns a short read into a clear error.
class HeaderReader {
 public:
  HeaderReader(std::ifstream& in, const std::string& path) : in_(in), path_(path) {}

  void bytes(char* out, size_t size) {
    in_.read(out, static_cast<std::streamsize>(size));
    if (static_cast<size_t>(in_.gcount()) != size)
      throw UserError("truncated shard header", path_, kRegenerateHint);
  }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  uint64_t u64() { return little_endian(8); }

 private:
  uint64_t little_endian(int size) {
    unsigned char raw[8];
    bytes(reinterpret_cast<char*>(raw), static_cast<size_t>(size));
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; --i) value = (value << 8) | raw[i];
    return value;
  }

  std::ifstream& in_;
  const std::string& path_;
};

std::ifstream open_for_reading(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error))
    throw UserError("shard file does not exist", path, "check the data path");
  if (fs::is_directory(path, error))
    throw UserError("expected a shard file, found a directory", path,
                    "pass the file, or use list_shards for a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError("cannot open shard file", path, "check its permissions");
  return in;
}

ShardHeader parse_header(std::ifstream& in, const std::string& path) {
  HeaderReader reader(in, path);
  char magic[sizeof kMagic];
  in.read(magic, sizeof magic);
  if (static_cast<size_t>(in.gcount()) != sizeof magic ||
      !std::equal(magic, magic + sizeof magic, kMagic))
    throw UserError("not a faultline shard (bad magic bytes)", path,
                    std::string("shard files start with \"FLSHARD\\0\"; ") + kRegenerateHint);

  ShardHeader header;
  header.format_version = reader.u32();
  if (header.format_version != kShardFormatVersion)
    throw UserError("unsupported shard format version: found " +
                        std::to_string(header.format_version) + ", supported " +
                        std::to_string(kShardFormatVersion),
                    path, std::string(kRegenerateHint) + " using this faultline build");

  uint32_t name_length = reader.u32();
  if (name_length > kMaxTokenizerName)
    throw UserError("corrupt shard header: tokenizer name length " + std::to_string(name_length),
                    path, kRegenerateHint);
  header.tokenizer.resize(name_length);
  if (name_length > 0) reader.bytes(&header.tokenizer[0], name_length);
  header.tokenizer_version = reader.u32();
  header.vocab_size = reader.u32();
  header.token_count = reader.u64();
  header.checksum = reader.u64();
  return header;
}

}  // namespace

uint64_t token_checksum(const std::vector<uint16_t>& tokens) {
  Hasher hasher;
  unsigned char buffer[2 * kChunkTokens];
  for (size_t start = 0; start < tokens.size(); start += kChunkTokens) {
    size_t count = std::min(kChunkTokens, tokens.size() - start);
    encode_tokens(tokens.data() + start, count, buffer);
    hasher.update(buffer, 2 * count);
  }
  return hasher.digest();
}

std::string numbered_shard_name(const std::string& prefix, uint32_t index) {
  char digits[16];
  std::snprintf(digits, sizeof digits, "%03u", index);
  return prefix + "-" + digits;
}

void write_shard(const std::string& path, const Shard& shard) {
  std::string header(kMagic, sizeof kMagic);
  put_u32(header, kShardFormatVersion);
  put_u32(header, static_cast<uint32_t>(shard.header.tokenizer.size()));
  header += shard.header.tokenizer;
  put_u32(header, shard.header.tokenizer_version);
  put_u32(header, shard.header.vocab_size);
  put_u64(header, shard.tokens.size());
  put_u64(header, token_checksum(shard.tokens));

  // Written under a temporary name and renamed, so a killed writer never leaves a shard that
  // looks complete; the temporary name does not end in .flshard, so list_shards skips it.
  std::string temporary = path + ".partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw UserError("cannot create shard file", temporary,
                      "check that the directory exists and is writable");
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    unsigned char buffer[2 * kChunkTokens];
    for (size_t start = 0; start < shard.tokens.size(); start += kChunkTokens) {
      size_t count = std::min(kChunkTokens, shard.tokens.size() - start);
      encode_tokens(shard.tokens.data() + start, count, buffer);
      out.write(reinterpret_cast<const char*>(buffer), static_cast<std::streamsize>(2 * count));
    }
    out.flush();
    if (!out) throw UserError("failed writing shard file", temporary, "check free disk space");
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) throw UserError("cannot rename shard file: " + error.message(), path);
}

ShardHeader read_shard_header(const std::string& path) {
  std::ifstream in = open_for_reading(path);
  return parse_header(in, path);
}

Shard read_shard(const std::string& path) {
  return read_shard(path, ChecksumPolicy::Verify);
}

Shard read_shard(const std::string& path, ChecksumPolicy policy) {
  std::ifstream in = open_for_reading(path);
  Shard shard;
  shard.name = fs::path(path).stem().string();
  shard.header = parse_header(in, path);

  // Check the size before allocating: a corrupt count must not turn into a huge allocation.
  const auto header_end = static_cast<uint64_t>(in.tellg());
  std::error_code error;
  const uint64_t file_size = fs::file_size(path, error);
  if (error) throw UserError("cannot stat shard file: " + error.message(), path);
  const uint64_t payload = file_size - header_end;
  const uint64_t expected = shard.header.token_count;
  if (payload / 2 < expected)
    throw UserError("truncated shard: expected " + std::to_string(expected) + " tokens, found " +
                        std::to_string(payload / 2),
                    path, kRegenerateHint);
  if (payload != 2 * expected)
    throw UserError("shard has " + std::to_string(payload - 2 * expected) +
                        " unexpected bytes after its " + std::to_string(expected) + " tokens",
                    path, kRegenerateHint);

  std::vector<unsigned char> raw(2 * expected);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
  if (static_cast<uint64_t>(in.gcount()) != raw.size())
    throw UserError("cannot read shard tokens", path, kRegenerateHint);
  shard.tokens.resize(expected);
  for (uint64_t i = 0; i < expected; ++i)
    shard.tokens[i] = static_cast<uint16_t>(raw[2 * i] | (raw[2 * i + 1] << 8));

  if (policy == ChecksumPolicy::Verify) {
    uint64_t computed = hash_bytes(raw.data(), raw.size());
    if (computed != shard.header.checksum)
      throw UserError("shard checksum mismatch: stored " + hex64(shard.header.checksum) +
                          ", computed " + hex64(computed),
                      path, "the file is damaged; " + std::string(kRegenerateHint));
  }
  return shard;
}

std::vector<std::string> list_shards(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error))
    throw UserError("data path does not exist", path,
                    "create shards with `faultline data synth --out DIR` or "
                    "`faultline data prepare --out DIR FILE...`");
  if (!fs::is_directory(path, error)) return {path};

  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, error)) {
    if (entry.is_regular_file() && entry.path().extension() == kShardExtension)
      files.push_back(entry.path().string());
  }
  if (error) throw UserError("cannot list directory: " + error.message(), path);
  if (files.empty())
    throw UserError("no shard files (*" + std::string(kShardExtension) + ") in directory", path,
                    "create shards with `faultline data synth --out DIR` or "
                    "`faultline data prepare --out DIR FILE...`");
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace faultline::data
