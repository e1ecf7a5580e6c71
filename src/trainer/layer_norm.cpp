// The fused LayerNorm's autograd function. Rows are split into fixed chunks; each chunk sums its
// own share of gamma's and beta's gradients and the shares are added in chunk order, so the
// result does not depend on the thread count.
#include "trainer/layer_norm.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <vector>

#include "trainer/cpu_kernels.hpp"
#include "trainer/layer_norm_kernel.hpp"

namespace faultline::trainer {

namespace {

constexpr int64_t kRowChunk = 64;

struct LayerNormFunction : torch::autograd::Function<LayerNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context,
                               const torch::Tensor& input, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps) {
    auto x = input.contiguous();
    const int64_t width = x.size(-1), rows = x.numel() / width;
    auto y = torch::empty_like(x);
    auto mean = torch::empty({rows}, x.options());
    auto rstd = torch::empty({rows}, x.options());
    auto gamma = weight.contiguous(), beta = bias.contiguous();
    at::parallel_for(0, rows, kRowChunk, [&](int64_t begin, int64_t end) {
      layer_norm_forward(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                         y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), width,
                         static_cast<float>(eps), begin, end - begin);
    });
    context->save_for_backward({x, gamma, mean, rstd});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = context->get_saved_variables();
    const auto &x = saved[0], &gamma = saved[1], &mean = saved[2], &rstd = saved[3];
    auto dy = grad_outputs[0].contiguous();
    const int64_t width = x.size(-1), rows = x.numel() / width;
    const int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
    auto dx = torch::empty_like(x);
    // Per chunk, gamma's then beta's share: [chunks, 2, width].
    std::vector<float> partial(static_cast<size_t>(chunks * 2 * width), 0.0f);
    at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
      for (int64_t chunk = first; chunk < last; ++chunk) {
        const int64_t begin = chunk * kRowChunk, count = std::min(kRowChunk, rows - begin);
        float* share = partial.data() + chunk * 2 * width;
        layer_norm_backward(dy.data_ptr<float>(), x.data_ptr<float>(), mean.data_ptr<float>(),
                            rstd.data_ptr<float>(), gamma.data_ptr<float>(), dx.data_ptr<float>(),
                            share, share + width, width, begin, count);
      }
    });
    auto sums = torch::zeros({2, width}, x.options());
    float* total = sums.data_ptr<float>();
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      for (int64_t j = 0; j < 2 * width; ++j) total[j] += partial[chunk * 2 * width + j];
    return {dx, sums[0], sums[1], torch::Tensor()};
  }
};

}  // namespace

torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias, double eps, CpuKernels kernels) {
  if (!fused_kernels_apply(kernels, x) || !weight.defined() || !bias.defined() ||
      weight.scalar_type() != torch::kFloat)
    return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  return LayerNormFunction::apply(x, weight, bias, eps);
}

}  // namespace faultline::trainer
