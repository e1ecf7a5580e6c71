// The fused GELU as a torch::autograd::Function: it saves only its input and recomputes the tanh
// in backward. The work is split over LibTorch's intra-op threads; each element is computed the
// same way whatever the split, so results do not depend on the thread count.
#include "trainer/gelu.hpp"

#include <ATen/Parallel.h>

#include "trainer/gelu_kernel.hpp"

namespace faultline::trainer {

namespace {

// Elements per task: below this a second thread costs more than it saves.
constexpr int64_t kGrain = 32768;

struct GeluTanhFunction : torch::autograd::Function<GeluTanhFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context,
                               const torch::Tensor& input) {
    auto x = input.contiguous();
    auto y = torch::empty_like(x);
    const float* x_data = x.data_ptr<float>();
    float* y_data = y.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      gelu_tanh_forward(x_data + begin, y_data + begin, end - begin);
    });
    context->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    auto x = context->get_saved_variables()[0];
    auto dy = grad_outputs[0].contiguous();
    auto dx = torch::empty_like(x);
    const float* x_data = x.data_ptr<float>();
    const float* dy_data = dy.data_ptr<float>();
    float* dx_data = dx.data_ptr<float>();
    at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      gelu_tanh_backward(x_data + begin, dy_data + begin, dx_data + begin, end - begin);
    });
    return {dx};
  }
};

}  // namespace

torch::Tensor gelu_tanh(const torch::Tensor& input) {
  if (input.scalar_type() != torch::kFloat || input.device().type() != torch::kCPU)
    return torch::gelu(input, "tanh");
  return GeluTanhFunction::apply(input);
}

}  // namespace faultline::trainer
