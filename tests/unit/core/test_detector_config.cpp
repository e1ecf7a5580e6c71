// Tests for probes/detectors/thresholds.cpp: the defaults file matches the built-in defaults
// key for key, and bad files fail with every error, its file:line and a did-you-mean.
#include "probes/detectors/thresholds.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.hpp"

namespace faultline::detectors {
namespace {

using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::user_errors;
using faultline::testing::write_file;

const std::string kDefaults = std::string(FAULTLINE_SOURCE_DIR) + "/recipes/detectors/default.toml";

std::string canonical_of(const ConfigSource& source) {
  Thresholds thresholds;
  ConfigBinder binder(source);
  bind_thresholds(binder, thresholds);
  binder.finish();
  return binder.canonical();
}

TEST(DetectorConfig, DefaultsFileLoadsAndMatchesTheBuiltInDefaults) {
  Thresholds loaded = load_thresholds(kDefaults);
  EXPECT_DOUBLE_EQ(loaded.loss_spike.factor, 10.0);
  EXPECT_EQ(loaded.stalled.after_steps, 100);
  ConfigSource file = ConfigSource::from_file(kDefaults);
  const std::string from_file = canonical_of(file);
  EXPECT_EQ(from_file, canonical_of(ConfigSource::from_string("", "empty.toml")));
  // It documents every key: as many values in the file as keys bound.
  size_t keys = static_cast<size_t>(std::count(from_file.begin(), from_file.end(), '\n'));
  EXPECT_EQ(file.values().size(), keys);
}

TEST(DetectorConfig, UnknownKeyNamesFileLineAndTheClosestKey) {
  ScratchDir dir;
  const std::string path = dir.file("det.toml");
  write_file(path, "[loss_spike]\nfactor = 5.0\nwindw = 30\n");
  ErrorItem error = user_error([&] { load_thresholds(path); });
  EXPECT_EQ(error.what, "unknown key 'loss_spike.windw'");
  EXPECT_EQ(error.where, path + ":3");
  EXPECT_EQ(error.hint, "did you mean 'loss_spike.window'?");
}

TEST(DetectorConfig, OverridesApplyOnTopOfTheFile) {
  Thresholds t =
      load_thresholds(kDefaults, {"memory.max_growth_mib_per_step=2.5", "straggler.enabled=false"});
  EXPECT_DOUBLE_EQ(t.memory.max_growth_mib_per_step, 2.5);
  EXPECT_FALSE(t.straggler.enabled);
  EXPECT_TRUE(t.data_stall.enabled);
}

TEST(DetectorConfig, AllErrorsAreReportedAtOnce) {
  ConfigSource source = ConfigSource::from_string(
      "[grad_explode]\nmax_norm = \"big\"\n[straggler]\nmin_score = 1.5\n[stalled]\n"
      "after_steps = 10\nwindow = 6\n",
      "bad.toml");
  std::vector<ErrorItem> errors = user_errors([&] { thresholds_from(source); });
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].where, "grad_explode.max_norm at bad.toml:2");
  EXPECT_EQ(errors[1].where, "straggler.min_score at bad.toml:4");
  EXPECT_NE(errors[2].what.find("more than half"), std::string::npos) << errors[2].what;
  EXPECT_EQ(errors[2].where, "stalled.window at bad.toml:7");
}

TEST(DetectorConfig, ThresholdsEmbedUnderAPrefix) {
  ConfigSource source =
      ConfigSource::from_string("[detectors.lr_anomaly]\njump_factor = 100.0\n", "trial.toml");
  Thresholds t;
  ConfigBinder binder(source);
  bind_thresholds(binder, t, "detectors.");
  binder.finish();
  EXPECT_DOUBLE_EQ(t.lr_anomaly.jump_factor, 100.0);
}

TEST(DetectorConfig, MissingFileIsAUserError) {
  ErrorItem error = user_error([] { load_thresholds("/nonexistent/det.toml"); });
  EXPECT_EQ(error.where, "/nonexistent/det.toml");
}

}  // namespace
}  // namespace faultline::detectors
