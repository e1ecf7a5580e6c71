// The linear layers' forward and backward as three products (cpu_gemm.hpp): y = x·Wᵀ + b in one
// matmul with its bias, dx = dy·W and dW = dyᵀ·x as sgemm calls, plus db = Σ dy. Same function
// as torch's linear, with oneDNN's GEMM.

#include "trainer/cpu_gemm.hpp"
#include "trainer/cpu_kernels.hpp"
#include "trainer/device.hpp"

namespace faultline::trainer {

namespace {

torch::Tensor linear_forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                             const torch::Tensor& weight, const torch::Tensor* bias) {
  const int64_t in = weight.size(1), out = weight.size(0);
  auto x2 = x.reshape({-1, in}).contiguous();
  auto w = weight.contiguous();
  const int64_t rows = x2.size(0);
  auto y = torch::empty({rows, out}, x.options());
  const auto b = bias ? bias->contiguous() : torch::Tensor();
  linear_gemm(rows, out, in, x2.data_ptr<float>(), w.data_ptr<float>(),
              bias ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  context->save_for_backward({x2, w});
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  return y.view(sizes);
}

// {dx, dW, db}; db only when the layer has a bias.
torch::autograd::variable_list linear_backward(torch::autograd::AutogradContext* context,
                                               const torch::Tensor& grad_output, bool has_bias) {
  const auto saved = context->get_saved_variables();
  const auto &x2 = saved[0], &w = saved[1];
  const int64_t rows = x2.size(0), in = w.size(1), out = w.size(0);
  auto dy = grad_output.reshape({rows, out}).contiguous();
  torch::Tensor dx, dw;
  if (context->needs_input_grad(0)) {
    dx = torch::empty({rows, in}, dy.options());
    sgemm(rows, in, out, 1.0f, {dy.data_ptr<float>(), out}, {w.data_ptr<float>(), in}, 0.0f,
          dx.data_ptr<float>(), in);
    auto sizes = grad_output.sizes().vec();
    sizes.back() = in;
    dx = dx.view(sizes);
  }
  if (context->needs_input_grad(1)) {
    dw = torch::empty({out, in}, dy.options());
    sgemm(out, in, rows, 1.0f, {dy.data_ptr<float>(), out, Transpose::Yes},
          {x2.data_ptr<float>(), in}, 0.0f, dw.data_ptr<float>(), in);
  }
  if (!has_bias) return {dx, dw};
  return {dx, dw, context->needs_input_grad(2) ? dy.sum(0) : torch::Tensor()};
}

// Two functions because LibTorch 1.13's Function::apply takes no undefined tensor.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    return linear_forward(context, x, weight, &bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    return linear_backward(context, grad_outputs[0], true);
  }
};

struct LinearNoBiasFunction : torch::autograd::Function<LinearNoBiasFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const torch::Tensor& weight) {
    return linear_forward(context, x, weight, nullptr);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    return linear_backward(context, grad_outputs[0], false);
  }
};

}  // namespace

bool fused_kernels_apply(CpuKernels kernels, const torch::Tensor& example) {
  return kernels == CpuKernels::Fused && example.device().is_cpu() &&
         example.scalar_type() == torch::kFloat;
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     CpuKernels kernels) {
  // Autocast (bf16) casts inside torch's linear; the fused path is for plain float32 only.
  if (!fused_kernels_apply(kernels, x) || weight.scalar_type() != torch::kFloat ||
      cpu_autocast_enabled())
    return torch::nn::functional::linear(x, weight, bias);
  return bias.defined() ? LinearFunction::apply(x, weight, bias)
                        : LinearNoBiasFunction::apply(x, weight);
}

}  // namespace faultline::trainer
