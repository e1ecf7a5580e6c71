// faultline-train: the bundled deterministic GPT trainer. Parses arguments, loads the config,
// runs the training loop, and maps errors to documented exit codes.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "common/error.hpp"
#include "trainer/trainer.hpp"

int main(int argc, char** argv) {
  using namespace faultline;
  CLI::App app{"faultline-train: deterministic LibTorch GPT trainer (see docs/trainer.md)"};
  std::string config_path, out_dir = "faultline-train-out", resume_path;
  std::vector<std::string> overrides;
  app.add_option("-c,--config", config_path, "trainer recipe (TOML)")->required();
  app.add_option("--set", overrides, "override a key: section.key=value (repeatable)");
  app.add_option("--out", out_dir, "output directory for checkpoints and metrics");
  app.add_option("--resume", resume_path, "checkpoint to continue from");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? 0 : static_cast<int>(trainer::TrainExit::UserError);
  }

  try {
    trainer::TrainerOptions options{trainer::load_train_config(config_path, overrides), out_dir,
                                    resume_path};
    return static_cast<int>(trainer::run_trainer(options));
  } catch (const UserError& error) {
    for (const auto& item : error.items())
      std::fprintf(stderr, "%s\n", format_error("faultline-train", item).c_str());
    return static_cast<int>(trainer::TrainExit::UserError);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "faultline-train: internal error: %s\n", error.what());
    return static_cast<int>(trainer::TrainExit::Internal);
  }
}
