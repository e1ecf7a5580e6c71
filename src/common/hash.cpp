// XXH64, written out from the public specification (github.com/Cyan4973/xxHash,
// doc/xxhash_spec.md).
#include "common/hash.hpp"

#include <cstring>

namespace faultline {

namespace {
constexpr uint64_t P1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t P3 = 0x165667B19E3779F9ULL;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t round(uint64_t acc, uint64_t lane) {
  acc += lane * P2;
  acc = rotl(acc, 31);
  return acc * P1;
}
inline uint64_t merge(uint64_t acc, uint64_t value) {
  acc ^= round(0, value);
  return acc * P1 + P4;
}
}  // namespace

Hasher::Hasher(uint64_t seed) : seed_(seed) {
  acc_[0] = seed + P1 + P2;
  acc_[1] = seed + P2;
  acc_[2] = seed;
  acc_[3] = seed - P1;
}

void Hasher::update(const void* data, size_t size) {
  auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (buffered_ + size < 32) {
    std::memcpy(buffer_ + buffered_, p, size);
    buffered_ += size;
    return;
  }
  if (buffered_ > 0) {
    size_t fill = 32 - buffered_;
    std::memcpy(buffer_ + buffered_, p, fill);
    for (int i = 0; i < 4; ++i) acc_[i] = round(acc_[i], read64(buffer_ + 8 * i));
    p += fill;
    size -= fill;
    buffered_ = 0;
  }
  while (size >= 32) {
    for (int i = 0; i < 4; ++i) acc_[i] = round(acc_[i], read64(p + 8 * i));
    p += 32;
    size -= 32;
  }
  std::memcpy(buffer_, p, size);
  buffered_ = size;
}

uint64_t Hasher::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(acc_[0], 1) + rotl(acc_[1], 7) + rotl(acc_[2], 12) + rotl(acc_[3], 18);
    for (int i = 0; i < 4; ++i) h = merge(h, acc_[i]);
  } else {
    h = seed_ + P5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  size_t left = buffered_;
  while (left >= 8) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
    left -= 8;
  }
  if (left >= 4) {
    h ^= static_cast<uint64_t>(read32(p)) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
    left -= 4;
  }
  while (left > 0) {
    h ^= (*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
    --left;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  Hasher hasher(seed);
  hasher.update(data, size);
  return hasher.digest();
}

std::string hex64(uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = digits[value & 0xF];
  return out;
}

}  // namespace faultline
