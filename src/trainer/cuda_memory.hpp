// The device's own memory figures, from the CUDA runtime and LibTorch's caching allocator. Built
// only against a CUDA LibTorch (FAULTLINE_TORCH_CUDA).
#pragma once

#include "trainer/device.hpp"

namespace faultline::trainer {

MemoryFigures cuda_memory_figures(int device_index);

}  // namespace faultline::trainer
