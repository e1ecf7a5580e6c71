// In-process non-finite probes: the always-on check is the gradient norm itself (see
// flat_params.hpp); these are the per-layer checks of `probe.level = "full"` — each module's
// forward output, and each parameter's gradient in backward order (parameter hooks).
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace faultline::probes {

struct NonfiniteSite {
  std::string where;          // module ("blocks.2.attn") or parameter ("blocks.2.attn.qkv.weight")
  int64_t nonfinite = 0;      // count of NaN/Inf elements
  std::vector<int64_t> rows;  // batch rows (dim 0) holding them; empty for parameters
};

// Records the first module whose output holds a NaN or Inf, and which batch rows do.
class ForwardFiniteCheck {
 public:
  // Returns true when this output is the first non-finite one since reset().
  bool check(const std::string& module, const torch::Tensor& output);
  const std::optional<NonfiniteSite>& first() const { return first_; }
  void reset() { first_.reset(); }

 private:
  std::optional<NonfiniteSite> first_;
};

// Hooks every parameter; the first gradient computed with a NaN/Inf names the parameter.
// Backward runs from the loss toward the input, so "first" is the one closest to the loss.
class GradFiniteCheck {
 public:
  void attach(const std::vector<std::pair<std::string, torch::Tensor>>& parameters);
  void set_enabled(bool enabled) { enabled_ = enabled; }
  const std::optional<NonfiniteSite>& first() const { return first_; }
  void reset() { first_.reset(); }

 private:
  bool enabled_ = false;
  std::optional<NonfiniteSite> first_;
};

// Count of non-finite elements of a tensor (any dtype float).
int64_t count_nonfinite(const torch::Tensor& tensor);

}  // namespace faultline::probes
