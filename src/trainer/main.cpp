// faultline-train: the bundled deterministic GPT trainer. Parses arguments, loads the config,
// runs the training loop, and maps errors to documented exit codes.
#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "common/error.hpp"
#include "common/resources.hpp"
#include "common/version.hpp"
#include "trainer/blas_kernel.hpp"
#include "trainer/cpu_gemm.hpp"
#include "trainer/device.hpp"
#include "trainer/runtime_info.hpp"
#include "trainer/trainer.hpp"

namespace {

// LibTorch's CPU allocator reports a failed allocation as a plain c10::Error (CAFFE_ENFORCE in
// c10/core/impl/alloc_cpu.cpp), so only its message tells it from any other library error:
// "can't allocate memory" when posix_memalign refuses, "not enough memory" when it returns null.
bool is_allocation_failure(const c10::Error& error) {
  const std::string& msg = error.msg();
  return msg.find("DefaultCPUAllocator") != std::string::npos &&
         (msg.find("can't allocate memory") != std::string::npos ||
          msg.find("not enough memory") != std::string::npos);
}

// Running out of memory is the run's failure, not the trainer's bug: a documented exit code
// lets the harness say `oom` instead of `crash`.
int out_of_memory(const char* what) {
  std::fprintf(stderr, "faultline-train: out of memory: %s\n", what);
  return static_cast<int>(faultline::trainer::TrainExit::OutOfMemory);
}

int internal_error(const char* what) {
  std::fprintf(stderr, "faultline-train: internal error: %s\n", what);
  return static_cast<int>(faultline::trainer::TrainExit::Internal);
}

// One line each: faultline, LibTorch, the BLAS with the kernel this process runs, and the GEMM
// of the trainer's fused CPU kernels (the default, train.cpu_kernels = "fused").
std::string version_text() {
  const faultline::trainer::RuntimeInfo runtime = faultline::trainer::describe_runtime();
  return std::string("faultline-train ") + FAULTLINE_VERSION + " (commit " + FAULTLINE_GIT_COMMIT +
         ")\nlibtorch " + runtime.torch_version + "\nblas " + runtime.blas_description() +
         "\ngemm " + faultline::trainer::fused_kernels_description() +
         " (train.cpu_kernels = \"fused\")";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace faultline;
  // Before anything else: OpenBLAS read OPENBLAS_CORETYPE when it was loaded, so a better kernel
  // than its fallback needs a fresh process image (docs/trainer.md, "BLAS kernel").
  trainer::set_cublas_workspace_default();  // read when CUDA initialises: before any CUDA use
  trainer::reexec_with_best_blas_kernel(argv);
  CLI::App app{"faultline-train: deterministic LibTorch GPT trainer (see docs/trainer.md)"};
  std::string config_path, out_dir = "faultline-train-out", resume_path;
  std::vector<std::string> overrides;
  app.add_option("-c,--config", config_path,
                 "trainer recipe: a TOML file or an installed name (tiny)")
      ->required();
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)");
  app.add_option("--out", out_dir, "output directory for checkpoints and metrics");
  app.add_option("--resume", resume_path, "checkpoint to continue from");
  app.set_version_flag("--version", version_text, "print versions of faultline, LibTorch, BLAS");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : static_cast<int>(trainer::TrainExit::UserError);
  }

  try {
    // -c takes an installed recipe's name (tiny, small) as faultline's own commands do.
    config_path = resolve_recipe(config_path, RecipeKind::Train, "-c");
    trainer::TrainerOptions options{trainer::load_train_config(config_path, overrides), out_dir,
                                    resume_path};
    return static_cast<int>(trainer::run_trainer(options));
  } catch (const UserError& error) {
    for (const auto& item : error.items())
      std::fprintf(stderr, "%s\n", format_error("faultline-train", item).c_str());
    return static_cast<int>(trainer::TrainExit::UserError);
  } catch (const c10::OutOfMemoryError& error) {  // a CUDA build's caching allocator
    return out_of_memory(error.what_without_backtrace());
  } catch (const c10::Error& error) {
    return is_allocation_failure(error) ? out_of_memory(error.what_without_backtrace())
                                        : internal_error(error.what());
  } catch (const std::bad_alloc& error) {
    return out_of_memory(error.what());
  } catch (const std::exception& error) {
    return internal_error(error.what());
  }
}
