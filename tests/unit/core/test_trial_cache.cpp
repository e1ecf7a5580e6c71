// trial_identity and reference_digest: a trial judged against a reference is a trial of its own,
// and the digest follows the reference's losses, not where they were stored.
#include "harness/trial/trial_cache.hpp"

#include <gtest/gtest.h>

using namespace faultline;
using namespace faultline::harness;

namespace {

std::vector<StepRecord> curve(double scale) {
  std::vector<StepRecord> run;
  for (int64_t step = 1; step <= 5; ++step) {
    StepRecord record;
    record.step = step;
    record.loss = scale / static_cast<double>(step);
    record.t = static_cast<double>(step) * 0.1 * scale;  // not a loss: not part of the digest
    run.push_back(record);
  }
  return run;
}

}  // namespace

TEST(TrialCache, AReferenceMakesATrialOfItsOwn) {
  TrialSpec spec;
  spec.config_path = "/nonexistent/recipe.toml";
  spec.overrides = {"optim.lr=1e-4"};
  const auto plain = trial_hash(trial_identity(spec, "trainer", "judge"));
  EXPECT_EQ(plain, trial_hash(trial_identity(spec, "trainer", "judge", "")));
  const auto one = reference_digest({curve(1.0)});
  const auto judged = trial_hash(trial_identity(spec, "trainer", "judge", one));
  EXPECT_NE(plain, judged);
  EXPECT_NE(judged,
            trial_hash(trial_identity(spec, "trainer", "judge", reference_digest({curve(2.0)}))));
}

TEST(TrialCache, TheReferenceDigestFollowsTheLosses) {
  auto same = curve(1.0);
  for (auto& record : same) record.t += 100;  // another run of the same losses
  EXPECT_EQ(reference_digest({curve(1.0)}), reference_digest({same}));
  auto other = curve(1.0);
  other.back().loss += 1e-9;
  EXPECT_NE(reference_digest({curve(1.0)}), reference_digest({other}));
  // Two runs are not one run of both curves' records.
  auto both = curve(1.0);
  const auto second = curve(2.0);
  both.insert(both.end(), second.begin(), second.end());
  EXPECT_NE(reference_digest({curve(1.0), curve(2.0)}), reference_digest({both}));
}
