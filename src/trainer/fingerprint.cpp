// The sketch's signs depend only on the element index, so every rank, run and trainer build
// computes them identically and sketches of equal-sized buffers are comparable.
#include "trainer/fingerprint.hpp"

#include <algorithm>
#include <cmath>

#include "common/hash.hpp"

namespace faultline::trainer {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

bool sketch_sign_is_positive(uint64_t index) {
  return splitmix64(index) & 1;
}

Fingerprint Fingerprinter::operator()(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  // On the host, a piece at a time into buffers kept between calls: the hash reads the bytes,
  // the sketch sums in the same order on any device, and a model as large as the device's
  // memory needs no second copy of itself (nor a sign per element) to be fingerprinted.
  const auto source = flat.reshape(-1);
  const int64_t n = source.numel();
  const int64_t chunk = std::max<int64_t>(1, (n + kSketchSize - 1) / kSketchSize);
  const int64_t piece = std::max<int64_t>(1, std::min(options_.piece, n));
  // A buffer already on the host and contiguous (the CPU trainer's) is read where it is, and
  // float32 bytes are already the values: only what is not gets copied, a piece at a time.
  const bool on_host = source.is_cpu() && source.is_contiguous();
  if (!on_host &&
      (!bytes_.defined() || bytes_.numel() != piece || bytes_.dtype() != source.dtype()))
    bytes_ = torch::empty({piece}, source.options().device(torch::kCPU));
  if (source.scalar_type() != torch::kFloat && (!values_.defined() || values_.numel() != piece))
    values_ = torch::empty({piece}, torch::dtype(torch::kFloat));
  Hasher hasher;
  double squares = 0;
  Fingerprint fingerprint;
  fingerprint.sketch.assign(kSketchSize, 0.0);
  for (int64_t start = 0; start < n; start += piece) {
    const int64_t count = std::min(piece, n - start);
    auto bytes = source.narrow(0, start, count);
    if (!on_host) bytes = bytes_.narrow(0, 0, count).copy_(bytes);
    hasher.update(bytes.data_ptr(), count * bytes.element_size());
    const auto values =
        bytes.scalar_type() == torch::kFloat ? bytes : values_.narrow(0, 0, count).copy_(bytes);
    const float* x = values.data_ptr<float>();
    for (int64_t first = 0; first < count;) {  // the part of each sketch chunk this piece holds
      const int64_t k = (start + first) / chunk;
      const int64_t last = std::min(count, (k + 1) * chunk - start);
      double signed_sum = 0;
      for (int64_t i = first; i < last; ++i) {
        const double value = x[i];
        squares += value * value;
        signed_sum += sketch_sign_is_positive(static_cast<uint64_t>(start + i)) ? value : -value;
      }
      fingerprint.sketch[k] += signed_sum;
      first = last;
    }
  }
  fingerprint.hash = hasher.digest();
  fingerprint.norm = std::sqrt(squares);
  return fingerprint;
}

}  // namespace faultline::trainer
