// Prints faultline's version, then the trainer's own `--version` lines (LibTorch, BLAS kernel).
#include "cli/version.hpp"

#include <fmt/core.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "cli/run_context.hpp"
#include "common/error.hpp"
#include "common/version.hpp"
#include "harness/launch/subprocess.hpp"

namespace faultline::cli {

int print_version() {
  fmt::print("faultline {} (commit {})\n", FAULTLINE_VERSION, FAULTLINE_GIT_COMMIT);
  std::string trainer;
  try {
    trainer = resolve_trainer(shared_context().trainer);
  } catch (const UserError& error) {
    fmt::print("trainer: not found ({})\n", error.items().front().where);
    return 0;
  }
  namespace fs = std::filesystem;
  const fs::path out = fs::temp_directory_path() / fmt::format("faultline-version-{}", getpid());
  harness::CommandSpec spec;
  spec.argv = {trainer, "--version"};
  spec.output_path = out.string();
  spec.timeout_s = 60;
  const auto result = harness::run_command(spec);
  const std::string text = harness::file_tail(out.string(), 8000);
  std::error_code ignored;
  fs::remove(out, ignored);
  if (result.end != harness::CommandEnd::Exited || result.exit_code != 0) {
    fmt::print("trainer: {} --version failed: {}\n", trainer, harness::describe(result, spec));
    return 0;
  }
  fmt::print("trainer: {}\n{}", trainer, text);
  return 0;
}

}  // namespace faultline::cli
