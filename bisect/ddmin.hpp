// Delta debugging (Zeller & Hildebrandt's ddmin) as a resumable state machine: shrinks a failing
// set of items (config keys, shards, samples, ranks) to a 1-minimal failing subset.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bisect/observation.hpp"

namespace faultline::bisect {

// A subset of the items 0..n-1, sorted ascending; the points a Ddmin proposes.
using Subset = std::vector<size_t>;

enum class DdminVariant {
  // Zeller & Hildebrandt 2002 exactly, every test evaluated (no cache): the reference count.
  Textbook,
  // The same decisions in the same order (same result on a deterministic test), but no subset
  // is evaluated twice: a cache of results, the known-failing full set, and at granularity 2
  // no complement tests (each complement is the other half).
  Improved,
};

// Assumed: failing is upward closed (a superset of a failing set fails). Improved then infers
// the result of any subset of a known-passing set and any superset of a known-failing set
// instead of evaluating it. Same result on a monotone test, fewer evaluations; on a test that
// is not monotone the result may not be 1-minimal, so it is off by default.
enum class Monotonicity { NotAssumed, Assumed };

struct DdminOptions {
  DdminVariant variant = DdminVariant::Improved;
  Monotonicity monotonicity = Monotonicity::NotAssumed;  // Assumed needs Improved
};

class Ddmin {
 public:
  // The full set 0..item_count-1 is given as failing and the empty set as passing; neither is
  // ever proposed. item_count >= 1.
  explicit Ddmin(size_t item_count, DdminOptions options = {});

  // Up to `slots` subsets to test now, in the order the sequential algorithm would test them
  // (the partition's subsets, then its complements). With slots > 1 the later ones are
  // speculative: decisions are always taken in sequential order, so the result is identical to
  // slots = 1. Empty when done or when every remaining test of this step is outstanding.
  std::vector<Subset> next(size_t slots = 1);

  // Records a test result; any order. Bad: the subset fails; Good: passes; Skip (unresolved)
  // counts as not failing. A repeat that agrees with the cache is ignored; a disagreeing repeat
  // or a subset never proposed is std::logic_error.
  void observe(const Subset& subset, Observation observation);

  bool done() const { return done_; }
  // The smallest failing subset found so far; 1-minimal once done().
  const Subset& failing_subset() const { return config_; }
  size_t evaluations() const { return evaluations_; }
  size_t granularity() const { return granularity_; }
  const DdminOptions& options() const { return options_; }

  // Current set, granularity, cache (Improved) or this step's results (Textbook). Proposals
  // still outstanding are not kept: they are proposed again after from_json.
  nlohmann::json to_json() const;
  static Ddmin from_json(const nlohmann::json& state);

 private:
  void start_step();
  void resolve_from_cache();
  std::optional<Observation> known_result(const Subset& subset) const;
  void advance();

  size_t item_count_;
  DdminOptions options_;
  Subset config_;           // the current failing set (Zeller's c')
  size_t granularity_ = 2;  // Zeller's n: the number of parts of config_
  // The tests of the current step, in sequential order: the n parts, then (unless skipped) the
  // n complements; their results, and whether each was handed out in this step.
  std::vector<Subset> tests_;
  std::vector<std::optional<Observation>> results_;
  std::vector<bool> proposed_;
  std::map<Subset, size_t> outstanding_;  // proposed and not yet observed, with multiplicity
  std::map<Subset, Observation> cache_;   // Improved: every real result (never inferred)
  size_t evaluations_ = 0;
  bool done_ = false;
};

}  // namespace faultline::bisect
