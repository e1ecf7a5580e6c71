// Unit tests of harness/commits/commit_judge's stored form of a commit run (the trial cache keeps
// it, and `bisect commits --json` prints it): every stage and verdict reads back as written.
#include "harness/commits/commit_judge.hpp"

#include <gtest/gtest.h>

namespace faultline::harness {
namespace {

TEST(CommitJudge, ACommitRunReadsBackFromItsStoredJsonInEveryStage) {
  using bisect::Observation;
  const std::pair<CommitStage, const char*> stages[] = {{CommitStage::Build, "build"},
                                                        {CommitStage::Test, "test"},
                                                        {CommitStage::Trial, "trial"},
                                                        {CommitStage::Baseline, "baseline"},
                                                        {CommitStage::Reference, "reference"}};
  for (const auto& [stage, name] : stages)
    for (Observation observation : {Observation::Good, Observation::Bad, Observation::Skip}) {
      CommitRun run;
      run.commit = "0123abc";
      run.run = 2;
      run.observation = observation;
      run.stage = stage;
      run.detail = "exit 1";
      run.log = "/tmp/log";
      run.run_id = 7;
      run.tokens_per_s = 1234.5;
      const nlohmann::json json = to_json(run);
      EXPECT_EQ(json.at("stage"), name);
      EXPECT_EQ(json.at("verdict"), to_string(observation));
      const CommitRun back = commit_run_from_json(json);
      EXPECT_EQ(back.stage, stage) << name;
      EXPECT_EQ(back.observation, observation) << name;
      EXPECT_EQ(back.commit, run.commit);
      EXPECT_EQ(back.run, run.run);
      EXPECT_EQ(back.run_id, run.run_id);
      EXPECT_EQ(back.tokens_per_s, run.tokens_per_s);
    }
}

TEST(CommitJudge, AStoredVerdictItDoesNotKnowIsAnErrorNotASkip) {
  CommitRun run;
  nlohmann::json json = to_json(run);
  json["verdict"] = "flaky";
  EXPECT_THROW(commit_run_from_json(json), std::invalid_argument);
}

}  // namespace
}  // namespace faultline::harness
