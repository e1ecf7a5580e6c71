// Fingerprints of a flat buffer: a bitwise digest (did anything change at all?) and a signed
// random sketch (how far apart are two buffers?), for rank-agreement and divergence checks.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace faultline::trainer {

constexpr int kSketchSize = 16;

struct Fingerprint {
  uint64_t hash = 0;  // XXH64 of the raw bytes
  double norm = 0;    // L2 norm
  // sketch[k] = Σ s_i·x_i over the k-th of kSketchSize contiguous chunks, s_i = ±1 from a fixed
  // hash of i: for two buffers x and y, |sketch(x) − sketch(y)| ≈ |x − y| (a random projection),
  // so a relative distance needs no access to the other run's buffer.
  std::vector<double> sketch;
};

// s_i of the sketch: the low bit of splitmix64(i) (probes/python/faultline_probe.py has the same).
bool sketch_sign_is_positive(uint64_t index);

struct FingerprintOptions {
  // Elements read at a time: the host buffers a fingerprint keeps are this many, whatever the
  // buffer's size.
  int64_t piece = int64_t{1} << 20;
};

class Fingerprinter {
 public:
  explicit Fingerprinter(FingerprintOptions options = {}) : options_(options) {}
  // Of the buffer's elements in order; any dtype and device (values are summed as float32).
  Fingerprint operator()(const torch::Tensor& flat);

 private:
  FingerprintOptions options_;
  torch::Tensor bytes_;   // a piece as stored, on the host
  torch::Tensor values_;  // the piece as float32
};

}  // namespace faultline::trainer
