// `faultline --version`: this build's version and git commit, and what decides the trainer's
// bits (its LibTorch and BLAS), asked of the trainer itself since faultline never links LibTorch.
#pragma once

namespace faultline::cli {

// Prints the version lines on stdout; returns the exit code (0, even when no trainer is found:
// the line says so).
int print_version();

}  // namespace faultline::cli
