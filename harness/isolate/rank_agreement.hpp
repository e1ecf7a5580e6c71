// Do ranks agree? Distances between fingerprint sketches (docs/metrics-protocol.md), the first
// step where a multi-rank run leaves a reference's trajectory, and the odd ranks out of a replica
// check. Pure functions over records: the isolate ranks phase does the running.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/metrics_record.hpp"

namespace faultline::harness {

// The distance of two buffers relative to the reference's size, estimated from their sketches:
// |sketch(a) − sketch(b)| / |sketch(b)|. NaN when either has no sketch or they differ in length;
// 0 when the digests are equal (the same bits).
double sketch_distance(const FingerprintRecord& a, const FingerprintRecord& reference);

// The healthy disagreement this comparison tolerates. Replica checks: healthy ranks were bitwise
// equal to the 1-rank reference (0) and a planted sign flip of one rank's gradient slice moved
// it by ~1. Parameters against a 1-rank replay with N-fold accumulation drift by reduction order:
// within a checkpoint interval of a 2,000-step 4-rank micro run at most 2.2e-5, over a whole
// 400-step run up to 7e-5; the planted corruption moved them by 2.7e-4 to 1.3e-3. docs/ranks.md.
constexpr double kRankTolerance = 1e-4;
// Drift grows smoothly and saturates; a wrong update jumps. A step parts only when its distance
// exceeds the tolerance and this many times the largest distance at the steps compared before it
// (drift can dip and come back; a wrong update leaves it behind).
constexpr double kDivergenceJump = 2;

struct Divergence {
  int64_t step = -1;       // the first step whose fingerprint leaves the reference's
  double distance = 0;     // there
  double healthy_max = 0;  // the largest distance at the steps before it (the measured floor)
};

// Fingerprints `what` of rank 0 of `run` against those of `reference`, step by step over the
// steps both have: the first step beyond `tolerance` and kDivergenceJump × the largest distance
// at the steps before it; nullopt when there is none.
// Steps up to `after` are not candidates, but their distances count as drift.
std::optional<Divergence> first_divergence(const std::vector<FingerprintRecord>& run,
                                           const std::vector<FingerprintRecord>& reference,
                                           Fingerprinted what, double tolerance, int64_t after = 0);

struct RankAgreement {
  int rank = 0;
  std::string hash;
  double distance = 0;  // to the reference (NaN: no reference)
  bool agrees = true;   // with the reference
  int peers = 0;        // other ranks within tolerance of this one
};

// Each rank's `what` fingerprint at `step` against the reference's (when
// given) and its peers'.
std::vector<RankAgreement> compare_ranks(const std::vector<FingerprintRecord>& run,
                                         const FingerprintRecord* reference, int64_t step,
                                         double tolerance,
                                         Fingerprinted what = Fingerprinted::Grads);

// Data parallel keeps every rank's parameters bitwise equal. The first step of `run` whose
// `params` fingerprints are not all rank 0's digest, and the ranks whose digest differs there;
// nullopt when they agree at every step fingerprinted on more than one rank.
struct ParamsSplit {
  int64_t step = -1;
  std::vector<int> ranks;
  // The last step before it whose params all ranks agreed on; -1 when none did (ranks that hold
  // different parameters from the start, as in model parallelism, are no split).
  int64_t agreed = -1;
};
std::optional<ParamsSplit> first_params_split(const std::vector<FingerprintRecord>& run);

// Rank 0's `what` fingerprint of `step`, or null.
const FingerprintRecord* print_at(const std::vector<FingerprintRecord>& records, Fingerprinted what,
                                  int64_t step);

// The odd ranks out: with three or more ranks and a strict majority that agrees among itself,
// the ranks outside it; otherwise (two ranks, or no majority) those that disagree with the
// reference. Empty when everyone agrees.
std::vector<int> odd_ranks(const std::vector<RankAgreement>& ranks);

}  // namespace faultline::harness
