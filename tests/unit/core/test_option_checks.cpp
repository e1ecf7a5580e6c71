// Tests for src/cli/option_checks.cpp: the number checks of command-line options (what passes,
// and the message of what does not), and a usage mistake as `faultline` prints it.
#include "cli/option_checks.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace faultline::cli {
namespace {

using faultline::testing::read_file;
using faultline::testing::ScratchDir;
using ::testing::HasSubstr;

// What the validator says of `text`: empty when it passes.
std::string verdict(const CLI::Validator& check, std::string text) {
  return check(text);
}

TEST(OptionChecks, AtLeastTakesIntegersFromItsMinimumOn) {
  const auto check = at_least(1);
  EXPECT_EQ(verdict(check, "1"), "");
  EXPECT_EQ(verdict(check, "4096"), "");
  EXPECT_EQ(verdict(check, "0"), "0 is not an integer >= 1");
  EXPECT_EQ(verdict(check, "-3"), "-3 is not an integer >= 1");
  EXPECT_EQ(verdict(check, "abc"), "'abc' is not an integer >= 1");
  EXPECT_EQ(verdict(check, "2.5"), "'2.5' is not an integer >= 1");
  EXPECT_EQ(verdict(check, ""), "'' is not an integer >= 1");
  EXPECT_EQ(verdict(check, "99999999999999999999"),
            "'99999999999999999999' is not an integer >= 1");
  EXPECT_EQ(verdict(at_least(0), "0"), "");
}

TEST(OptionChecks, BetweenTakesBothEnds) {
  const auto check = between(1, 1000);
  EXPECT_EQ(verdict(check, "1"), "");
  EXPECT_EQ(verdict(check, "1000"), "");
  EXPECT_EQ(verdict(check, "1001"), "1001 is not an integer in [1, 1000]");
  EXPECT_EQ(verdict(check, "0"), "0 is not an integer in [1, 1000]");
}

TEST(OptionChecks, AboveZeroAndNotNegativeDifferAtZero) {
  EXPECT_EQ(verdict(above_zero(), "0.5"), "");
  EXPECT_EQ(verdict(above_zero(), "0"), "0 is not a number > 0");
  EXPECT_EQ(verdict(above_zero(), "-1"), "-1 is not a number > 0");
  EXPECT_EQ(verdict(above_zero(), "inf"), "'inf' is not a number > 0");
  EXPECT_EQ(verdict(above_zero(), "1e-3"), "");
  EXPECT_EQ(verdict(not_negative(), "0"), "");
  EXPECT_EQ(verdict(not_negative(), "-0.1"), "-0.1 is not a number >= 0");
  EXPECT_EQ(verdict(not_negative(), "nan"), "'nan' is not a number >= 0");
}

TEST(OptionChecks, ARejectedValueLeavesTheFieldAndNamesTheOption) {
  CLI::App app{"test", "faultline"};
  auto* train = app.add_subcommand("train");
  long long steps = 0;
  train->add_option("--steps", steps)->check(at_least(1));
  try {
    app.parse(std::vector<std::string>{"-3", "--steps", "train"});  // CLI11 reads it reversed
    FAIL() << "--steps -3 was taken";
  } catch (const CLI::ValidationError& error) {
    EXPECT_STREQ(error.what(), "--steps: -3 is not an integer >= 1");
  }
  EXPECT_EQ(steps, 0);
  EXPECT_EQ(usage_hint(app), "see `faultline train --help`");
}

TEST(OptionChecks, UsageHintNamesTheDeepestSubcommand) {
  CLI::App app{"test", "faultline"};
  auto* data = app.add_subcommand("data");
  data->add_subcommand("synth")->add_option("--shards")->check(between(1, 10));
  EXPECT_THROW(app.parse(std::vector<std::string>{"0", "--shards", "synth", "data"}),
               CLI::ValidationError);
  EXPECT_EQ(usage_hint(app), "see `faultline data synth --help`");

  CLI::App bare{"test", "faultline"};
  bare.add_subcommand("runs");
  EXPECT_THROW(bare.parse(std::vector<std::string>{"nosuch"}), CLI::ExtrasError);
  EXPECT_EQ(usage_hint(bare), "see `faultline --help`");
}

// The built binary: a usage mistake is one `faultline: error:` line and exit 2, before anything
// runs or is stored; with --json it is also one document on stdout.
struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Result run(const ScratchDir& dir, const std::string& args) {
  const std::string binary = FAULTLINE_BINARY_DIR "/src/cli/faultline";
  const std::string err_path = dir.file("stderr.txt");
  const std::string command =
      "cd '" + dir.path() + "' && '" + binary + "' " + args + " 2>'" + err_path + "'";
  Result result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = read_file(err_path);
  return result;
}

TEST(OptionChecks, TheBinaryRefusesANegativeStepCountBeforeRunningAnything) {
  ScratchDir dir;
  const Result text = run(dir, "train -c tiny --steps -3");
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_EQ(text.err,
            "faultline: error: --steps: -3 is not an integer >= 1 (command line); see `faultline "
            "train --help`\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("faultline.db")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("faultline-runs")));

  const Result json = run(dir, "--json isolate --run 0");
  EXPECT_EQ(json.exit_code, 2);
  const auto doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc.at("error").at("kind"), "usage");
  const auto& item = doc.at("error").at("items").at(0);
  EXPECT_EQ(item.at("what"), "--run: 0 is not an integer >= 1");
  EXPECT_EQ(item.at("where"), "command line");
  EXPECT_EQ(item.at("hint"), "see `faultline isolate --help`");
  EXPECT_THAT(json.err, HasSubstr("faultline: error: --run: 0 is not an integer >= 1"));
}

// A mistyped command is named as one, with the command it is likely to be: CLI11's own message
// listed the rest of the line backwards ("not expected: tiny -c trian"). Options before the
// command and their values are not taken for it.
TEST(OptionChecks, AnUnknownCommandIsNamedWithTheOneItIsLikelyToBe) {
  ScratchDir dir;
  const Result typo = run(dir, "--db x.db trian -c tiny");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("faultline: error: unknown command 'trian' (command line); did "
                                  "you mean 'train'? the commands: "));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.db")));
  const Result other = run(dir, "frobnicate");
  EXPECT_THAT(other.err, HasSubstr("faultline: error: unknown command 'frobnicate' (command "
                                   "line); the commands: "));
  // A known command's own mistakes keep CLI11's words.
  EXPECT_THAT(run(dir, "runs --bogus").err, HasSubstr("--bogus"));
}

}  // namespace
}  // namespace faultline::cli
