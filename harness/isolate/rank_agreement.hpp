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

// The healthy disagreement this comparison tolerates: a 1-rank replay with N-fold accumulation
// was measured at 0 (bitwise equal) on the bundled trainer here, and other reduction orders
// differ by float32 rounding (~1e-7 relative per step, growing with the steps); a planted
// sign flip of one rank's gradient slice moves the update by > 1e-3. docs/ranks.md.
constexpr double kRankTolerance = 1e-5;
// Reduction-order drift between N ranks and one grows smoothly and saturates (measured on a
// 400-step 4-rank micro run: 1.1e-5 at step 12, 7e-5 at step 300, never 1.3x the largest before
// it past step 10); a wrong update jumps (4.2x at the corrupted step). A step parts only when
// its distance exceeds the tolerance and this many times the distance at the
// steps compared before it (their largest: the drift so far can dip and come back, a wrong
// update leaves it behind).
constexpr double kDivergenceJump = 2;

struct Divergence {
  int64_t step = -1;       // the first step whose fingerprint leaves the reference's
  double distance = 0;     // there
  double healthy_max = 0;  // the largest distance at the steps before it (the measured floor)
};

// Fingerprints `what` of rank 0 of `run` against those of `reference`, step by step over the
// steps both have: the first step beyond `tolerance` and kDivergenceJump × the largest distance
// at the steps before it; nullopt when there is none.
std::optional<Divergence> first_divergence(const std::vector<FingerprintRecord>& run,
                                           const std::vector<FingerprintRecord>& reference,
                                           const std::string& what, double tolerance);

struct RankAgreement {
  int rank = 0;
  std::string hash;
  double distance = 0;  // to the reference (NaN: no reference)
  bool agrees = true;   // with the reference
  int peers = 0;        // other ranks within tolerance of this one
};

// Each rank's `grads` fingerprint at `step` against the reference's (when given) and its peers'.
std::vector<RankAgreement> compare_ranks(const std::vector<FingerprintRecord>& run,
                                         const FingerprintRecord* reference, int64_t step,
                                         double tolerance);

// The odd ranks out: with three or more ranks and a strict majority that agrees among itself,
// the ranks outside it; otherwise (two ranks, or no majority) those that disagree with the
// reference. Empty when everyone agrees.
std::vector<int> odd_ranks(const std::vector<RankAgreement>& ranks);

}  // namespace faultline::harness
