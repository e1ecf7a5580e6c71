// `faultline check nccl` and the lookup of the GPU module's files (gpu/, built with
// FAULTLINE_CUDA).
#include "cli/gpu_commands.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "cli/option_checks.hpp"
#include "common/error.hpp"
#include "common/resources.hpp"

namespace faultline::cli {

namespace {

namespace fs = std::filesystem;

// The first of `candidates` that exists, after the path in `env_var` (which must exist if set).
std::string find_gpu_file(const char* env_var, const std::vector<fs::path>& candidates,
                          const char* what) {
  if (const char* chosen = std::getenv(env_var); chosen && *chosen) {
    if (access(chosen, R_OK) != 0)
      throw UserError(std::string(what) + " does not exist", chosen,
                      std::string("check ") + env_var);
    return fs::absolute(chosen).string();
  }
  for (const auto& candidate : candidates)
    if (access(candidate.c_str(), R_OK) == 0) return fs::weakly_canonical(candidate).string();
  throw UserError(
      std::string("cannot find ") + what, executable_dir().string(),
      std::string("faultline was built without the GPU module (FAULTLINE_CUDA needs the "
                  "CUDA toolkit with CUPTI and NCCL); or set ") +
          env_var);
}

struct NcclCheckArgs {
  int ranks = 0;
  int64_t bytes = 64 << 20;
  int iters = 20;
};

[[noreturn]] void run_nccl_check(const NcclCheckArgs& args) {
  const std::string program = find_gpu_file(
      "FAULTLINE_NCCL_CHECK", {executable_dir() / "faultline-nccl-check"}, "faultline-nccl-check");
  std::vector<std::string> words = {program,
                                    "--ranks",
                                    std::to_string(args.ranks),
                                    "--bytes",
                                    std::to_string(args.bytes),
                                    "--iters",
                                    std::to_string(args.iters)};
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execv(program.c_str(), argv.data());
  throw UserError("cannot run faultline-nccl-check: " + std::string(std::strerror(errno)), program,
                  "check that it is an executable file");
}

}  // namespace

void add_check_commands(CLI::App& app) {
  auto* check = app.add_subcommand("check", "checks of the machine the training runs on");
  check->require_subcommand(1);
  auto args = std::make_shared<NcclCheckArgs>();
  auto* nccl = check->add_subcommand(
      "nccl", "allreduce correctness and bus bandwidth over this node's GPUs (NCCL)");
  nccl->add_option("--ranks", args->ranks, "ranks, one per GPU (default: every visible GPU)")
      ->check(at_least(1));
  nccl->add_option("--bytes", args->bytes, "allreduce size in bytes")->check(between(4, 1 << 30));
  nccl->add_option("--iters", args->iters, "timed allreduces per measurement")
      ->check(between(1, 100000));
  nccl->callback([args] { run_nccl_check(*args); });
}

std::string resolve_cupti_library() {
  return find_gpu_file("FAULTLINE_CUPTI_LIB",
                       {executable_dir() / "libfaultline_cupti.so",
                        executable_dir() / "../lib/libfaultline_cupti.so"},
                       "libfaultline_cupti.so");
}

}  // namespace faultline::cli
