// Sketch distances and the verdicts built on them. NaN distances (no sketch, non-finite values)
// never count as agreement.
#include "harness/isolate/rank_agreement.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace faultline::harness {

double sketch_distance(const FingerprintRecord& a, const FingerprintRecord& reference) {
  if (!a.hash.empty() && a.hash == reference.hash) return 0;
  if (a.sketch.empty() || a.sketch.size() != reference.sketch.size()) return std::nan("");
  double difference = 0, size = 0;
  for (size_t i = 0; i < a.sketch.size(); ++i) {
    difference += (a.sketch[i] - reference.sketch[i]) * (a.sketch[i] - reference.sketch[i]);
    size += reference.sketch[i] * reference.sketch[i];
  }
  if (size == 0) return difference == 0 ? 0 : std::numeric_limits<double>::infinity();
  return std::sqrt(difference / size);
}

namespace {
std::map<int64_t, const FingerprintRecord*> by_step(const std::vector<FingerprintRecord>& records,
                                                    Fingerprinted what, int rank) {
  std::map<int64_t, const FingerprintRecord*> steps;
  for (const auto& record : records)
    if (record.is(what) && record.rank == rank) steps[record.step] = &record;
  return steps;
}
}  // namespace

std::optional<Divergence> first_divergence(const std::vector<FingerprintRecord>& run,
                                           const std::vector<FingerprintRecord>& reference,
                                           Fingerprinted what, double tolerance, int64_t after) {
  const auto reference_steps = by_step(reference, what, 0);
  double healthy = 0;
  for (const auto& [step, record] : by_step(run, what, 0)) {
    auto other = reference_steps.find(step);
    if (other == reference_steps.end()) continue;
    const double distance = sketch_distance(*record, *other->second);
    if (step > after && std::isnan(distance)) return Divergence{step, distance, healthy};
    if (std::isnan(distance)) continue;
    if (step > after && (distance > tolerance && distance > kDivergenceJump * healthy))
      return Divergence{step, distance, healthy};
    healthy = std::max(healthy, distance);
  }
  return std::nullopt;
}

std::optional<ParamsSplit> first_params_split(const std::vector<FingerprintRecord>& run) {
  std::map<int64_t, std::map<int, const std::string*>> digests;  // step -> rank -> digest
  for (const auto& record : run)
    if (record.is(Fingerprinted::Params)) digests[record.step][record.rank] = &record.hash;
  int64_t agreed = -1;
  for (const auto& [step, ranks] : digests) {
    auto zero = ranks.find(0);
    if (zero == ranks.end() || ranks.size() < 2) continue;
    ParamsSplit split{step, {}, agreed};
    for (const auto& [rank, digest] : ranks)
      if (*digest != *zero->second) split.ranks.push_back(rank);
    if (!split.ranks.empty()) return split;
    agreed = step;
  }
  return std::nullopt;
}

const FingerprintRecord* print_at(const std::vector<FingerprintRecord>& records, Fingerprinted what,
                                  int64_t step) {
  for (const auto& record : records)
    if (record.is(what) && record.step == step && record.rank == 0) return &record;
  return nullptr;
}

std::vector<RankAgreement> compare_ranks(const std::vector<FingerprintRecord>& run,
                                         const FingerprintRecord* reference, int64_t step,
                                         double tolerance, Fingerprinted what) {
  std::vector<const FingerprintRecord*> records;
  for (const auto& record : run)
    if (record.is(what) && record.step == step) records.push_back(&record);
  std::sort(
      records.begin(), records.end(),
      [](const FingerprintRecord* a, const FingerprintRecord* b) { return a->rank < b->rank; });
  std::vector<RankAgreement> ranks;
  for (const auto* record : records) {
    RankAgreement agreement{record->rank, record->hash, std::nan(""), true, 0};
    if (reference) {
      agreement.distance = sketch_distance(*record, *reference);
      agreement.agrees = agreement.distance <= tolerance;
    }
    for (const auto* other : records)
      if (other != record && sketch_distance(*record, *other) <= tolerance) ++agreement.peers;
    ranks.push_back(agreement);
  }
  return ranks;
}

std::vector<int> odd_ranks(const std::vector<RankAgreement>& ranks) {
  std::vector<int> odd;
  const size_t world = ranks.size();
  const bool majority =
      world >= 3 && std::any_of(ranks.begin(), ranks.end(), [&](const RankAgreement& rank) {
        return 2 * static_cast<size_t>(rank.peers + 1) > world;
      });
  for (const auto& rank : ranks) {
    const bool outside = majority ? 2 * static_cast<size_t>(rank.peers + 1) <= world : !rank.agrees;
    if (outside) odd.push_back(rank.rank);
  }
  return odd;
}

}  // namespace faultline::harness
