// sgemm over oneDNN (FAULTLINE_ONEDNN) or over LibTorch's mm on tensors that wrap the caller's
// memory, so both paths read and write the same strided buffers.
#include "trainer/cpu_gemm.hpp"

#include <fmt/format.h>

#include <stdexcept>

#ifdef FAULTLINE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#else
#include <torch/torch.h>
#endif

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

std::string sgemm_description() {
  return "LibTorch mm";
}

#endif

}  // namespace faultline::trainer
