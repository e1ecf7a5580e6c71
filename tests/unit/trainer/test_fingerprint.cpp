// Tests for src/trainer/fingerprint.cpp: the hash, norm and sketch of a buffer read in pieces.
#include "trainer/fingerprint.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/hash.hpp"

namespace faultline::trainer {
namespace {

// Bit i: the sign of element start + i, from splitmix64 in Python's integer arithmetic
// (probes/python/faultline_probe.py's definition, the one both trainers share).
uint64_t sign_bits(uint64_t start) {
  uint64_t bits = 0;
  for (uint64_t i = 0; i < 64; ++i)
    if (sketch_sign_is_positive(start + i)) bits |= uint64_t{1} << i;
  return bits;
}

TEST(Fingerprint, SignsAreTheLowBitOfSplitmix64) {
  EXPECT_EQ(sign_bits(0), 0xb345d63d0223b88bULL);  // splitmix64(0) = 0xe220a8397b1dcdaf: odd
  EXPECT_EQ(sign_bits(uint64_t{1} << 40), 0xc904b0bfebb9d41bULL);
}

// The definition over the whole buffer at once, in double.
Fingerprint of_the_whole(const torch::Tensor& buffer) {
  const auto values = buffer.to(torch::kFloat).to(torch::kDouble).contiguous();
  const int64_t n = values.numel();
  const int64_t chunk = std::max<int64_t>(1, (n + kSketchSize - 1) / kSketchSize);
  Fingerprint want;
  const auto host = buffer.contiguous();
  want.hash = hash_bytes(host.data_ptr(), host.numel() * host.element_size());
  want.norm = values.norm().item<double>();
  const double* x = values.data_ptr<double>();
  want.sketch.assign(kSketchSize, 0.0);
  for (int64_t i = 0; i < n; ++i)
    want.sketch[i / chunk] += sketch_sign_is_positive(i) ? x[i] : -x[i];
  return want;
}

Fingerprinter in_pieces_of(int64_t piece) {
  FingerprintOptions options;
  options.piece = piece;
  return Fingerprinter(options);
}

void expect_same(const Fingerprint& got, const Fingerprint& want) {
  EXPECT_EQ(got.hash, want.hash);
  EXPECT_NEAR(got.norm, want.norm, 1e-9 * std::max(1.0, want.norm));
  ASSERT_EQ(got.sketch.size(), want.sketch.size());
  for (size_t k = 0; k < want.sketch.size(); ++k)
    EXPECT_NEAR(got.sketch[k], want.sketch[k], 1e-9 * std::max(1.0, std::abs(want.sketch[k])))
        << "chunk " << k;
}

TEST(Fingerprint, PiecesThatStraddleTheSketchChunksGiveTheWholeBuffersFingerprint) {
  torch::manual_seed(4);
  // 7-element pieces against 63-element chunks (1000 values), and against 1-element chunks with
  // empty ones after them (5 values).
  for (int64_t n : {1000, 5, 1}) {
    const auto buffer = torch::randn({n});
    Fingerprinter in_pieces = in_pieces_of(7);
    Fingerprinter whole;
    expect_same(in_pieces(buffer), of_the_whole(buffer));
    expect_same(whole(buffer), of_the_whole(buffer));
  }
}

TEST(Fingerprint, ABufferOfAnotherDtypeHashesItsOwnBytesAndSumsItsValues) {
  torch::manual_seed(5);
  Fingerprinter fingerprinter = in_pieces_of(16);
  const auto floats = torch::randn({100});
  const auto halves = floats.to(torch::kBFloat16);
  expect_same(fingerprinter(halves), of_the_whole(halves));
  expect_same(fingerprinter(floats), of_the_whole(floats));  // the same fingerprinter, reused
  EXPECT_NE(fingerprinter(halves).hash, fingerprinter(floats).hash);
}

TEST(Fingerprint, AStridedBufferIsCopiedAPieceAtATimeAndFingerprintsItsValues) {
  torch::manual_seed(7);
  const auto every_other = torch::randn({200}).slice(0, 0, 200, 2);  // a view of stride 2
  ASSERT_FALSE(every_other.is_contiguous());
  Fingerprinter fingerprinter = in_pieces_of(16);
  expect_same(fingerprinter(every_other), of_the_whole(every_other));
  expect_same(fingerprinter(every_other.to(torch::kBFloat16)),
              of_the_whole(every_other.to(torch::kBFloat16)));
}

TEST(Fingerprint, OneChangedValueChangesTheHashAndMovesOneChunkOfTheSketch) {
  torch::manual_seed(6);
  const auto buffer = torch::randn({1600});
  auto changed = buffer.clone();
  changed[250] += 0.5;
  Fingerprinter fingerprinter = in_pieces_of(64);
  const auto a = fingerprinter(buffer);
  const auto b = fingerprinter(changed);
  EXPECT_NE(a.hash, b.hash);
  for (int k = 0; k < kSketchSize; ++k) {
    const double moved = std::abs(b.sketch[k] - a.sketch[k]);
    if (k == 2)  // 100 values a chunk
      EXPECT_NEAR(moved, 0.5, 1e-6);
    else
      EXPECT_EQ(moved, 0.0) << "chunk " << k;
  }
}

}  // namespace
}  // namespace faultline::trainer
