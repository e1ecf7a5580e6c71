// Tests for src/common/text.cpp: edit distance, did-you-mean, trim, split.
#include "common/text.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline {
namespace {

TEST(Text, EditDistanceCountsInsertionsDeletionsSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("lr", "lr"), 0u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
}

TEST(Text, ClosestMatchSuggestsPlausibleTypos) {
  std::vector<std::string> keys = {"optim.lr", "optim.weight_decay", "model.n_layer"};
  EXPECT_EQ(closest_match("optim.lrr", keys), "optim.lr");
  EXPECT_EQ(closest_match("model.n_layers", keys), "model.n_layer");
  EXPECT_EQ(closest_match("completely.different", keys), "");
  EXPECT_EQ(closest_match("anything", {}), "");
}

TEST(Text, ClosestMatchFindsTheRightNameInTheWrongSection) {
  EXPECT_EQ(closest_match("train.lr", {"optim.lr", "train.steps"}), "optim.lr");
}

TEST(Text, DidYouMeanIsReadyToAppend) {
  EXPECT_EQ(did_you_mean("stpes", {"steps", "seed"}), "did you mean 'steps'?");
  EXPECT_EQ(did_you_mean("zzzzzzzz", {"steps"}), "");
}

TEST(Text, TrimRemovesSurroundingWhitespaceOnly) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim(" \n "), "");
  EXPECT_EQ(trim(""), "");
}

TEST(Text, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(split("", ','), std::vector<std::string>{""});
  EXPECT_EQ(split("x.y.z", '.'), (std::vector<std::string>{"x", "y", "z"}));
}

TEST(Text, LowercaseChangesAsciiLettersOnly) {
  EXPECT_EQ(lowercase("NaN -Inf True_2"), "nan -inf true_2");
  EXPECT_EQ(lowercase(""), "");
}

TEST(Text, ShellCommandQuotesWhatAShellWouldSplitAndKeepsEmptyArguments) {
  EXPECT_EQ(shell_command({"a", "b c", "it's", "--set", "x.y=1", ""}),
            "a 'b c' 'it'\\''s' --set x.y=1 ''");
  EXPECT_EQ(shell_word("/usr/bin/python3"), "/usr/bin/python3");
  EXPECT_EQ(shell_word("$HOME"), "'$HOME'");
}

TEST(Text, ParseIntegerAndNumberTakeTheWholeTextOnly) {
  EXPECT_EQ(parse_integer("42"), 42);
  EXPECT_EQ(parse_integer("-3"), -3);
  EXPECT_EQ(parse_integer(""), std::nullopt);
  EXPECT_EQ(parse_integer("4x"), std::nullopt);
  EXPECT_EQ(parse_integer("2.5"), std::nullopt);
  EXPECT_EQ(parse_integer("99999999999999999999"), std::nullopt);  // out of range
  EXPECT_EQ(parse_number("1e-2"), 0.01);
  EXPECT_EQ(parse_number("3"), 3.0);
  EXPECT_EQ(parse_number(""), std::nullopt);
  EXPECT_EQ(parse_number("0.1 "), std::nullopt);
  EXPECT_TRUE(std::isinf(*parse_number("inf")));
  EXPECT_TRUE(std::isnan(*parse_number("nan")));
}

TEST(Text, LossTextKeepsFourDecimalsUntilTheLossOutgrowsThem) {
  EXPECT_EQ(loss_text(5.60143), "5.6014");
  EXPECT_EQ(loss_text(0.00012), "0.0001");
  EXPECT_EQ(loss_text(9999.5), "9999.5000");
  EXPECT_EQ(loss_text(243730104320.0), "2.437e+11");
  EXPECT_EQ(loss_text(-12345.0), "-1.234e+04");
  EXPECT_EQ(loss_text(std::nan("")), "nan");
  EXPECT_EQ(loss_text(-HUGE_VAL), "-inf");
}

TEST(Text, OptionNamedByAKeyIsTheOneWhoseWordsAllAppearInIt) {
  const std::vector<std::string> options = {"--db", "--step-timeout", "--ranks", "--steps"};
  EXPECT_EQ(option_named_by("timeout.step_s", options), "--step-timeout");
  EXPECT_EQ(option_named_by("launch.ranks", options), "--ranks");
  EXPECT_EQ(option_named_by("optim.lr", options), "");
  EXPECT_EQ(option_named_by("STEP_TIMEOUT", options), "--step-timeout");  // case folds
}

TEST(Text, CountedSaysOneTrialAndTwoTrials) {
  EXPECT_EQ(counted(1, "trial"), "1 trial");
  EXPECT_EQ(counted(0, "trial"), "0 trials");
  EXPECT_EQ(counted(13, "trial"), "13 trials");
}

}  // namespace
}  // namespace faultline
