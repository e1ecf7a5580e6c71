// sgemm over oneDNN (FAULTLINE_ONEDNN) or over LibTorch's mm on tensors that wrap the caller's
// memory, so both paths read and write the same strided buffers. A linear layer's forward is one
// oneDNN matmul primitive.
#include "trainer/cpu_gemm.hpp"

#include <fmt/format.h>

#include <stdexcept>

#ifdef FAULTLINE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#else
#include <torch/torch.h>

#include <algorithm>
#endif

#include "trainer/simd_path.hpp"

namespace faultline::trainer {

#ifdef FAULTLINE_ONEDNN

namespace {
const char* isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}
}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
           float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status =
      dnnl_sgemm(a.op == Transpose::Yes ? 'T' : 'N', b.op == Transpose::Yes ? 'T' : 'N', m, n, k,
                 alpha, a.data, a.ld, b.data, b.ld, beta, c, ldc);
  // Only bad arguments fail, and the kernels compute those: a bug, not a user error.
  if (status != dnnl_success)
    throw std::logic_error(
        fmt::format("dnnl_sgemm failed with status {} (m {}, n {}, k {}, lda {}, ldb {}, ldc {})",
                    static_cast<int>(status), m, n, k, a.ld, b.ld, ldc));
}

namespace {

// One matmul primitive per shape: creating one compiles its kernels (milliseconds), running it
// takes microseconds, and a trainer runs the same few shapes every step.
struct LinearPrimitives {
  using Shape = std::tuple<int64_t, int64_t, int64_t, bool>;  // m, n, k, with bias
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Shape, dnnl::matmul> cache;
  std::mutex mutex;

  dnnl::matmul& get(const Shape& shape) {
    auto found = cache.find(shape);
    if (found != cache.end()) return found->second;
    const auto [m, n, k, with_bias] = shape;
    using tag = dnnl::memory::format_tag;
    const auto f32 = dnnl::memory::data_type::f32;
    dnnl::memory::desc x({m, k}, f32, tag::ab), y({m, n}, f32, tag::ab);
    dnnl::memory::desc w({k, n}, f32, tag::ba);  // [n, k] in memory: the logical k × n, transposed
    auto desc = with_bias ? dnnl::matmul::desc(x, w, dnnl::memory::desc({1, n}, f32, tag::ab), y)
                          : dnnl::matmul::desc(x, w, y);
    return cache.emplace(shape, dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine)))
        .first->second;
  }
};

}  // namespace

void linear_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, const float* bias,
                 float* y) {
  if (m == 0 || n == 0) return;
  static LinearPrimitives primitives;
  std::lock_guard<std::mutex> lock(primitives.mutex);
  auto& matmul = primitives.get({m, n, k, bias != nullptr});
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  auto wrap = [&](dnnl::memory::dims dims, tag layout, const float* data) {
    return dnnl::memory({dims, f32, layout}, primitives.engine, const_cast<float*>(data));
  };
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, wrap({m, k}, tag::ab, x)},
                                             {DNNL_ARG_WEIGHTS, wrap({k, n}, tag::ba, w)},
                                             {DNNL_ARG_DST, wrap({m, n}, tag::ab, y)}};
  if (bias) args.emplace(DNNL_ARG_BIAS, wrap({1, n}, tag::ab, bias));
  matmul.execute(primitives.stream, args);
  primitives.stream.wait();
}

std::string sgemm_description() {
  const dnnl_version_t* version = dnnl_version();
  return fmt::format("oneDNN {}.{}.{} ({})", version->major, version->minor, version->patch,
                     isa_name(dnnl_get_effective_cpu_isa()));
}

#else

namespace {
// The stored matrix (rows × cols, leading dimension ld) as a tensor over the same memory, then
// transposed as op says.
torch::Tensor wrap(ConstMatrix m, int64_t op_rows, int64_t op_cols) {
  const bool transposed = m.op == Transpose::Yes;
  const int64_t rows = transposed ? op_cols : op_rows, cols = transposed ? op_rows : op_cols;
  auto stored = torch::from_blob(const_cast<float*>(m.data), {rows, cols}, {m.ld, 1},
                                 torch::dtype(torch::kFloat));
  return transposed ? stored.t() : stored;
}
}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, ConstMatrix a, ConstMatrix b, float beta,
           float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  torch::NoGradGuard no_grad;
  auto out = torch::from_blob(c, {m, n}, {ldc, 1}, torch::dtype(torch::kFloat));
  // With beta = 0, addmm ignores `out`'s old contents, NaN included (its documented contract).
  torch::addmm_out(out, out, wrap(a, m, k), wrap(b, k, n), beta, alpha);
}

void linear_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, const float* bias,
                 float* y) {
  float beta = 0.0f;
  if (bias) {
    for (int64_t row = 0; row < m; ++row) std::copy(bias, bias + n, y + row * n);
    beta = 1.0f;
  }
  sgemm(m, n, k, 1.0f, {x, k}, {w, k, Transpose::Yes}, beta, y, n);
}

std::string sgemm_description() {
  return "LibTorch mm";
}

#endif

std::string fused_kernels_description() {
  return sgemm_description() + ", loops " + to_string(simd_path());
}

}  // namespace faultline::trainer
