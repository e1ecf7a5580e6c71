// faultline-train's exit codes (docs/trainer.md). A planted crash exits with its own code/signal.
#pragma once

namespace faultline::trainer {

enum class TrainExit : int {
  Ok = 0,
  Internal = 1,     // a bug or an unexpected library error
  UserError = 2,    // bad config, data, checkpoint or environment
  Nonfinite = 3,    // halted on the first non-finite step (probe.halt_on_nonfinite)
  DataAnomaly = 4,  // a token id outside the vocabulary
  OutOfMemory = 5,  // an allocation failed (std::bad_alloc or LibTorch's allocator)
};

}  // namespace faultline::trainer
