// Test support for the tests labelled `slurm`: whether the local cluster
// (scripts/slurm-local.sh) is reachable, and what Slurm still lists.
#pragma once

#include <optional>
#include <string>

namespace faultline::testing {

// Why no Slurm cluster can be used (SLURM_CONF unset, sinfo failing, the reason
// scripts/slurm-local.sh left when it could not start); nullopt when one answers.
std::optional<std::string> slurm_unavailable();

// The jobs squeue still lists (pending, running, completing) whose command mentions `marker`.
int slurm_jobs_mentioning(const std::string& marker);

}  // namespace faultline::testing

// Skips the test with the reason when no cluster is reachable; fails it instead where one must
// be (FAULTLINE_SLURM_REQUIRED=1, set by .ci/run).
#define REQUIRE_SLURM()                                            \
  do {                                                             \
    if (auto why = ::faultline::testing::slurm_unavailable()) {    \
      if (std::getenv("FAULTLINE_SLURM_REQUIRED")) FAIL() << *why; \
      GTEST_SKIP() << *why;                                        \
    }                                                              \
  } while (0)
