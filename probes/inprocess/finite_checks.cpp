// Per-layer finiteness checks. Each costs one reduction per module on the happy path; rows are
// only located once something is found.
#include "probes/inprocess/finite_checks.hpp"

#include <cmath>

namespace faultline::probes {

int64_t count_nonfinite(const torch::Tensor& tensor) {
  torch::NoGradGuard no_grad;
  return tensor.numel() - torch::isfinite(tensor).sum().item<int64_t>();
}

bool ForwardFiniteCheck::check(const std::string& module, const torch::Tensor& output) {
  if (first_) return false;
  torch::NoGradGuard no_grad;
  // sum() is NaN/Inf iff an element is (or, rarely, on overflow — then the exact count decides).
  if (std::isfinite(output.sum().item<double>())) return false;
  int64_t bad = count_nonfinite(output);
  if (bad == 0) return false;
  NonfiniteSite site{module, bad, {}};
  if (output.dim() >= 2) {
    auto row_ok = torch::isfinite(output.reshape({output.size(0), -1})).all(1);
    auto rows = torch::nonzero(row_ok.logical_not()).flatten();
    for (int64_t i = 0; i < rows.numel(); ++i) site.rows.push_back(rows[i].item<int64_t>());
  }
  first_ = std::move(site);
  return true;
}

void GradFiniteCheck::attach(const std::vector<std::pair<std::string, torch::Tensor>>& parameters) {
  for (const auto& [name, param] : parameters) {
    auto tensor = param;
    tensor.register_hook([this, name = name](const torch::Tensor& grad) {
      if (!enabled_ || first_) return;
      // As in forward: one sum() on the happy path (~0.3 ms a step on tiny against ~5.6 ms for an
      // exact count of every gradient); the exact count only once something is off.
      if (std::isfinite(grad.sum().item<double>())) return;
      int64_t bad = count_nonfinite(grad);
      if (bad > 0) first_ = NonfiniteSite{name, bad, {}};
    });
  }
}

}  // namespace faultline::probes
