// Causal self-attention as one autograd function over cpu_gemm's sgemm. Rows are taken in blocks
// of kRowBlock; a block of queries is multiplied only with the keys up to its last row, so the
// masked upper triangle costs about half as many FLOPs (five-eighths of the square on `small`).
// Queries, keys and values are read where the fused qkv projection put them, and the heads are
// written side by side; only forward copies a head's keys, transposed. Each block's softmax
// (softmax_kernel.hpp) runs right after its scores, while they are in cache.
#include <ATen/Parallel.h>

#include <cmath>
#include <vector>

#include "trainer/cpu_gemm.hpp"
#include "trainer/cpu_kernels.hpp"
#include "trainer/device.hpp"
#include "trainer/softmax_kernel.hpp"

namespace faultline::trainer {

namespace {

constexpr int64_t kRowBlock = 32;

// Where one head's matrices live inside the [B, T, 3C] and [B, T, C] buffers.
struct HeadLayout {
  int64_t time, width, head_dim;
  int64_t qkv_offset(int64_t batch, int64_t head, int part) const {
    return batch * time * 3 * width + part * width + head * head_dim;
  }
  int64_t out_offset(int64_t batch, int64_t head) const {
    return batch * time * width + head * head_dim;
  }
};

// One head's [time, head_dim] slice (rows ld apart) as a dense [head_dim, time] matrix: products
// with it as the right operand are then untransposed GEMMs, which oneDNN runs about half again
// as fast as transposed ones at these sizes.
void transpose_head(const float* source, int64_t ld, int64_t time, int64_t head_dim,
                    float* target) {
  for (int64_t t = 0; t < time; ++t)
    for (int64_t d = 0; d < head_dim; ++d) target[d * time + t] = source[t * ld + d];
}

// The rows [begin, end) of each query block, with the keys [0, end) it attends to.
template <typename Body>
void for_each_row_block(int64_t time, Body body) {
  for (int64_t begin = 0; begin < time; begin += kRowBlock)
    body(begin, std::min(begin + kRowBlock, time));
}

struct CausalAttentionFunction : torch::autograd::Function<CausalAttentionFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context,
                               const torch::Tensor& qkv_in, int64_t n_head) {
    auto qkv = qkv_in.contiguous();
    const int64_t batch = qkv.size(0), time = qkv.size(1), width = qkv.size(2) / 3;
    const HeadLayout layout{time, width, width / n_head};
    const float scale = 1.0f / std::sqrt(static_cast<float>(layout.head_dim));
    const int64_t ld_qkv = 3 * width;
    const float* base = qkv.data_ptr<float>();
    // The softmax overwrites the scores in place: this buffer ends as the probabilities.
    auto probs = torch::empty({batch * n_head, time, time}, qkv.options());
    float* p_data = probs.data_ptr<float>();
    auto y = torch::empty({batch, time, width}, qkv.options());
    float* y_data = y.data_ptr<float>();

    at::parallel_for(0, batch * n_head, 1, [&](int64_t first, int64_t last) {
      std::vector<float> keys_t(layout.head_dim * time);
      for (int64_t bh = first; bh < last; ++bh) {
        const int64_t b = bh / n_head, h = bh % n_head;
        const float* q = base + layout.qkv_offset(b, h, 0);
        const float* v = base + layout.qkv_offset(b, h, 2);
        transpose_head(base + layout.qkv_offset(b, h, 1), ld_qkv, time, layout.head_dim,
                       keys_t.data());
        float* p = p_data + bh * time * time;
        float* out = y_data + layout.out_offset(b, h);
        for_each_row_block(time, [&](int64_t begin, int64_t end) {
          sgemm(end - begin, end, layout.head_dim, scale, {q + begin * ld_qkv, ld_qkv},
                {keys_t.data(), time}, 0.0f, p + begin * time, time);
          causal_softmax_rows(p, time, begin, end - begin, time);
          sgemm(end - begin, layout.head_dim, end, 1.0f, {p + begin * time, time}, {v, ld_qkv},
                0.0f, out + begin * width, width);
        });
      }
    });
    context->save_for_backward({qkv, probs});
    context->saved_data["n_head"] = n_head;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = context->get_saved_variables();
    const auto &qkv = saved[0], &probs = saved[1];
    const int64_t n_head = context->saved_data["n_head"].toInt();
    const int64_t batch = qkv.size(0), time = qkv.size(1), width = qkv.size(2) / 3;
    const HeadLayout layout{time, width, width / n_head};
    const int64_t hd = layout.head_dim, ld_qkv = 3 * width;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    auto dy = grad_outputs[0].contiguous();
    auto dqkv = torch::empty_like(qkv);
    auto dscores = torch::empty_like(probs);
    const float* base = qkv.data_ptr<float>();
    const float* p_data = probs.data_ptr<float>();
    const float* dy_data = dy.data_ptr<float>();
    float* dbase = dqkv.data_ptr<float>();
    float* ds_data = dscores.data_ptr<float>();

    at::parallel_for(0, batch * n_head, 1, [&](int64_t first, int64_t last) {
      for (int64_t bh = first; bh < last; ++bh) {
        const int64_t b = bh / n_head, h = bh % n_head;
        const float *q = base + layout.qkv_offset(b, h, 0), *k = base + layout.qkv_offset(b, h, 1),
                    *v = base + layout.qkv_offset(b, h, 2);
        float *dq = dbase + layout.qkv_offset(b, h, 0), *dk = dbase + layout.qkv_offset(b, h, 1),
              *dv = dbase + layout.qkv_offset(b, h, 2);
        const float* p = p_data + bh * time * time;
        float* ds = ds_data + bh * time * time;
        const float* dout = dy_data + layout.out_offset(b, h);
        // The last block reaches every key, so it writes dK and dV whole (beta 0); the earlier
        // ones add into their prefix: a fixed order, so the sums are the same on every run.
        const int64_t last_begin = (time - 1) / kRowBlock * kRowBlock;
        for (int64_t begin = last_begin; begin >= 0; begin -= kRowBlock) {
          const int64_t end = std::min(begin + kRowBlock, time), rows = end - begin;
          const float beta = begin == last_begin ? 0.0f : 1.0f;
          float* ds_block = ds + begin * time;
          // dP = dY·Vᵀ, then the softmax's backward in place: dS = P ⊙ (dP − Σ P·dP).
          sgemm(rows, end, hd, 1.0f, {dout + begin * width, width}, {v, ld_qkv, Transpose::Yes},
                0.0f, ds_block, time);
          causal_softmax_backward_rows(p, ds, time, begin, rows, end);
          sgemm(rows, hd, end, scale, {ds_block, time}, {k, ld_qkv}, 0.0f, dq + begin * ld_qkv,
                ld_qkv);
          sgemm(end, hd, rows, scale, {ds_block, time, Transpose::Yes},
                {q + begin * ld_qkv, ld_qkv}, beta, dk, ld_qkv);
          sgemm(end, hd, rows, 1.0f, {p + begin * time, time, Transpose::Yes},
                {dout + begin * width, width}, beta, dv, ld_qkv);
        }
      }
    });
    return {dqkv, torch::Tensor()};
  }
};

torch::Tensor aten_causal_attention(const torch::Tensor& qkv, int64_t n_head,
                                    const torch::Tensor& mask_bias) {
  const int64_t batch = qkv.size(0), time = qkv.size(1), width = qkv.size(2) / 3;
  const int64_t head_dim = width / n_head;
  // [B, T, 3, H, hd] → one copy to [3, B·H, T, hd] → three views. unbind's backward is one
  // stack; indexing each part would zero-fill and add three full-size gradients instead.
  auto parts = qkv.view({batch, time, 3, n_head, head_dim})
                   .permute({2, 0, 3, 1, 4})
                   .contiguous()
                   .view({3, batch * n_head, time, head_dim})
                   .unbind(0);
  const auto &q = parts[0], &k = parts[1], &v = parts[2];
  auto bias = mask_bias.narrow(0, 0, time).narrow(1, 0, time);
  auto scores = torch::baddbmm(bias, q, k.transpose(1, 2), /*beta=*/1.0,
                               /*alpha=*/1.0 / std::sqrt(static_cast<double>(head_dim)));
  auto y = torch::bmm(torch::softmax(scores, -1), v);
  return y.view({batch, n_head, time, head_dim}).transpose(1, 2).reshape({batch, time, width});
}

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& qkv, int64_t n_head,
                               const torch::Tensor& mask_bias, CpuKernels kernels) {
  if (!fused_kernels_apply(kernels, qkv) || cpu_autocast_enabled())
    return aten_causal_attention(qkv, n_head, mask_bias);
  return CausalAttentionFunction::apply(qkv, n_head);
}

}  // namespace faultline::trainer
