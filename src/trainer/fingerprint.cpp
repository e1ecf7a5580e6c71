// The sketch's signs depend only on the element index, so every rank, run and trainer build
// computes them identically and sketches of equal-sized buffers are comparable.
#include "trainer/fingerprint.hpp"

#include "common/hash.hpp"

namespace faultline::trainer {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

torch::Tensor sign_pattern(int64_t numel) {
  auto signs = torch::empty({numel}, torch::kFloat);
  float* out = signs.data_ptr<float>();
  for (int64_t i = 0; i < numel; ++i)
    out[i] = (splitmix64(static_cast<uint64_t>(i)) & 1) ? 1.0f : -1.0f;
  return signs;
}

}  // namespace

Fingerprint Fingerprinter::operator()(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  // On the host: the hash reads the bytes, and the sketch sums in the same order on any device.
  const auto host = flat.to(torch::kCPU).contiguous();
  auto values = host.to(torch::kFloat).contiguous();
  Fingerprint fingerprint;
  fingerprint.hash = hash_bytes(host.data_ptr(), host.numel() * host.element_size());
  fingerprint.norm = values.norm().item<double>();
  if (!signs_.defined() || signs_.numel() != values.numel()) signs_ = sign_pattern(values.numel());
  auto signed_values = (values * signs_).to(torch::kDouble);
  const int64_t chunk = (values.numel() + kSketchSize - 1) / kSketchSize;
  for (int64_t k = 0; k < kSketchSize; ++k) {
    const int64_t begin = std::min(values.numel(), k * chunk);
    const int64_t length = std::min(values.numel() - begin, chunk);
    fingerprint.sketch.push_back(
        length > 0 ? signed_values.narrow(0, begin, length).sum().item<double>() : 0.0);
  }
  return fingerprint;
}

}  // namespace faultline::trainer
