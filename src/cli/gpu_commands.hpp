// The GPU module's programs as faultline finds them: `faultline check nccl` (which runs
// faultline-nccl-check) and the CUPTI probe that `--cupti` injects. faultline links no CUDA.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace faultline::cli {

// Registers `check nccl --ranks N [--bytes B] [--iters I]`. It replaces this process with
// faultline-nccl-check, so its output and exit code are the check's (docs/gpu.md).
void add_check_commands(CLI::App& app);

// libfaultline_cupti.so: $FAULTLINE_CUPTI_LIB, else next to faultline or in ../lib (installed).
// Not found: UserError saying faultline was built without the GPU module.
std::string resolve_cupti_library();

}  // namespace faultline::cli
