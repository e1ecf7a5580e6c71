// The trainer's only CUDA runtime calls: the current device, and the device's own memory figures
// (with LibTorch's caching allocator). Built only against a CUDA LibTorch (FAULTLINE_TORCH_CUDA).
#pragma once

#include "trainer/device.hpp"

namespace faultline::trainer {

void make_cuda_device_current(int device_index);
MemoryFigures cuda_memory_figures(int device_index);

}  // namespace faultline::trainer
