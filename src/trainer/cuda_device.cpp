// cudaMemGetInfo for free/total (what runs out is the device, whoever holds it) and the caching
// allocator's peak allocated bytes (what this process's tensors needed at most).
#include "trainer/cuda_device.hpp"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

namespace faultline::trainer {

// Streams, cuBLAS handles and NCCL's communicator follow the current device: each rank makes its
// own current before any CUDA work.
void make_cuda_device_current(int device_index) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device_index));
}

MemoryFigures cuda_memory_figures(int device_index) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
  size_t free_bytes = 0, total_bytes = 0;
  MemoryFigures figures;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    figures.used_bytes = static_cast<int64_t>(total_bytes - free_bytes);
    figures.total_bytes = static_cast<int64_t>(total_bytes);
  }
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device_index));
  // Index 0 is StatType::AGGREGATE (all pools) in every LibTorch since 1.x; the enum moved
  // namespaces in 2.x.
  figures.peak_allocated_bytes = stats.allocated_bytes[0].peak;
  return figures;
}

}  // namespace faultline::trainer
