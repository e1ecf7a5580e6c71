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

class Fingerprinter {
 public:
  Fingerprint operator()(const torch::Tensor& flat);

 private:
  torch::Tensor signs_;  // the ±1 pattern, built once for the buffer's size
};

}  // namespace faultline::trainer
