// harness/trial/run_facts: what a start event says stays nondeterministic, and which of its facts
// decide a run's bits.
#include "harness/trial/run_facts.hpp"

#include <gtest/gtest.h>

namespace faultline::harness {
namespace {

TEST(SaidNondeterministic, IsTheStartEventsListOfWhatStaysSo) {
  const auto start = nlohmann::json::parse(R"j({"nondeterministic": [
      "determinism=\"warn\": an op with no deterministic kernel runs nondeterministically",
      "", 7, "CUBLAS_WORKSPACE_CONFIG=:0:0 (cuBLAS may reduce in any order)"]})j");
  EXPECT_EQ(
      said_nondeterministic(start),
      (std::vector<std::string>{
          "determinism=\"warn\": an op with no deterministic kernel runs nondeterministically",
          "CUBLAS_WORKSPACE_CONFIG=:0:0 (cuBLAS may reduce in any order)"}));
}

TEST(SaidNondeterministic, IsEmptyWhenTheTrainerSaidNothing) {
  EXPECT_TRUE(said_nondeterministic(nlohmann::json::object()).empty());
  EXPECT_TRUE(said_nondeterministic(nlohmann::json::parse(R"({"nondeterministic": []})")).empty());
  EXPECT_TRUE(said_nondeterministic(nlohmann::json::parse(R"({"nondeterministic": "x"})")).empty());
}

TEST(SaidCompiled, IsTheHelpersCompiledFlag) {
  EXPECT_TRUE(said_compiled(nlohmann::json::parse(R"({"compiled": true})")));
  EXPECT_FALSE(said_compiled(nlohmann::json::parse(R"({"compiled": false})")));
  EXPECT_FALSE(said_compiled(nlohmann::json::object()));  // the bundled trainer, an older helper
  EXPECT_FALSE(said_compiled(nlohmann::json::parse(R"({"compiled": "yes"})")));
}

TEST(HostFacts, KeepsTheBitDecidingKeysAndTheHost) {
  const auto start = nlohmann::json::parse(
      R"({"cpu": "x86", "threads": 1, "host": "n1", "loss": 3.5, "torch_version": "1.13"})");
  EXPECT_EQ(host_facts(start), nlohmann::json::parse(
                                   R"({"cpu": "x86", "threads": 1, "host": "n1",
                                       "torch_version": "1.13"})"));
}

}  // namespace
}  // namespace faultline::harness
