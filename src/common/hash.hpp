// Content hashing: XXH64 for bitwise fingerprints, shard and checkpoint checksums, config hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace faultline {

// Streaming XXH64 (Yann Collet's algorithm); digest() may be called at any point.
class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0);
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  uint64_t digest() const;

 private:
  uint64_t seed_;
  uint64_t acc_[4];
  unsigned char buffer_[32];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);
inline uint64_t hash_text(std::string_view text) {
  return hash_bytes(text.data(), text.size());
}

// 16 lower-case hex digits.
std::string hex64(uint64_t value);

}  // namespace faultline
