// Tests for src/common/config.cpp: TOML + overrides, binding with every error reported at once,
// and the canonical form.
#include "common/config.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.hpp"

namespace faultline {
namespace {

using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::user_errors;
using faultline::testing::write_file;

constexpr char kToml[] = R"(name = "tiny"
[optim]
lr = 0.1
warmup = 10
[model]
n_layer = 2
tied = true
[[rungs]]
steps = 5
[[rungs]]
steps = 50
)";

struct Fields {
  std::string name = "default";
  double lr = 0.5;
  int64_t warmup = 0;
  int n_layer = 1;
  bool tied = false;
  int64_t steps0 = 0;
  int64_t steps1 = 0;
};

void bind_all(ConfigBinder& binder, Fields& f) {
  binder.bind("name", f.name);
  binder.bind("optim.lr", f.lr, {0.0, 2.5});
  binder.bind("optim.warmup", f.warmup, {0, 1000});
  binder.bind("model.n_layer", f.n_layer, {1, 64});
  binder.bind("model.tied", f.tied);
  binder.bind("rungs.0.steps", f.steps0);
  binder.bind("rungs.1.steps", f.steps1);
}

TEST(Config, BindsFileValues) {
  ConfigSource source = ConfigSource::from_string(kToml, "tiny.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  binder.finish();
  EXPECT_EQ(f.name, "tiny");
  EXPECT_DOUBLE_EQ(f.lr, 0.1);
  EXPECT_EQ(f.warmup, 10);
  EXPECT_EQ(f.n_layer, 2);
  EXPECT_TRUE(f.tied);
  EXPECT_EQ(f.steps0, 5);
  EXPECT_EQ(f.steps1, 50);
  EXPECT_EQ(source.values().at("optim.lr").origin, "tiny.toml:3");
}

TEST(Config, OverridesBeatTheFile) {
  ConfigSource source = ConfigSource::from_string(kToml, "tiny.toml");
  source.apply_overrides({"optim.lr=0.25", "model.tied = false", "name=123"});
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  binder.finish();
  EXPECT_DOUBLE_EQ(f.lr, 0.25);
  EXPECT_FALSE(f.tied);
  EXPECT_EQ(f.name, "123");  // a --set string may look like a number
}

TEST(Config, MissingKeysKeepDefaults) {
  ConfigSource source = ConfigSource::from_string("", "empty.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  binder.finish();
  EXPECT_EQ(f.name, "default");
  EXPECT_DOUBLE_EQ(f.lr, 0.5);
}

TEST(Config, UnknownKeySuggestsTheClosestKnownOne) {
  ConfigSource source = ConfigSource::from_string("[optim]\nlrr = 0.1\n", "typo.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  ErrorItem error = user_error([&] { binder.finish(); });
  EXPECT_EQ(error.what, "unknown key 'optim.lrr'");
  EXPECT_EQ(error.where, "typo.toml:2");
  EXPECT_EQ(error.hint, "did you mean 'optim.lr'?");
}

// An array where one value goes is flattened to model.n_layer.0, .1: said once as what it is
// ("unknown key 'model.n_layer.0'; did you mean 'model.n_layer'?" before), also for [[optim]].
TEST(Config, AnArrayWhereOneValueGoesIsSaidOnceAsSuch) {
  ConfigSource source =
      ConfigSource::from_string("[model]\nn_layer = [1, 2]\n[[optim]]\nlr = 0.1\n", "arrays.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  std::vector<ErrorItem> errors = user_errors([&] { binder.finish(); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].what, "'model.n_layer' is written as an array");
  EXPECT_EQ(errors[0].where, "arrays.toml:2");
  EXPECT_EQ(errors[0].hint, "it takes one value: write n_layer = <value> in its [model] table");
  EXPECT_EQ(errors[1].what, "'optim.lr' is written as an array");
}

// A key written above its table's header belongs to no table: the key of that name in one.
TEST(Config, AKeyOutsideItsTableIsPointedToIt) {
  ConfigSource source = ConfigSource::from_string("warmup = 5\n[optim]\nlr = 0.1\n", "top.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  ErrorItem error = user_error([&] { binder.finish(); });
  EXPECT_EQ(error.what, "unknown key 'warmup'");
  EXPECT_EQ(error.hint, "did you mean 'optim.warmup' (warmup in its [optim] table)?");
}

TEST(Config, TypeErrorsNameKeyOriginAndExpectation) {
  ConfigSource source =
      ConfigSource::from_string("[model]\nn_layer = \"two\"\ntied = 1\n", "t.toml");
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  std::vector<ErrorItem> errors = user_errors([&] { binder.finish(); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_NE(errors[0].what.find("expected an integer in [1, 64], got string \"two\""),
            std::string::npos)
      << errors[0].what;
  EXPECT_EQ(errors[0].where, "model.n_layer at t.toml:2");
  EXPECT_EQ(errors[1].what, "expected a boolean, got integer 1");
  EXPECT_EQ(errors[1].hint, "use true or false");
}

TEST(Config, RangeErrorsSayWhatIsValid) {
  ConfigSource source = ConfigSource::from_string("", "r.toml");
  source.apply_overrides({"optim.warmup=5000", "optim.lr=-1"});
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  std::vector<ErrorItem> errors = user_errors([&] { binder.finish(); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].what, "value -1 is out of range");
  EXPECT_EQ(errors[0].where, "optim.lr at --set optim.lr");
  EXPECT_EQ(errors[0].hint, "expected a number >= 0.0 and <= 2.5");
  EXPECT_EQ(errors[1].what, "value 5000 is out of range");
  EXPECT_EQ(errors[1].hint, "expected an integer in [0, 1000]");
  EXPECT_EQ(f.warmup, 0);  // a rejected value leaves the default
}

// inf (or 1e400, which parses to it) passes a bound that has no maximum; no setting means it.
TEST(Config, AnInfiniteNumberIsRefusedWhereNoMaximumWouldCatchIt) {
  ConfigSource source = ConfigSource::from_string("[optim]\nbeta = inf\n", "i.toml");
  source.apply_overrides({"optim.eps=1e400"});
  double beta = 0.9, eps = 1e-8;
  ConfigBinder binder(source);
  binder.bind("optim.beta", beta, {0.0, {}});
  binder.bind("optim.eps", eps, {0.0, {}});
  std::vector<ErrorItem> errors = user_errors([&] { binder.finish(); });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].what, "value inf is not a finite number");
  EXPECT_EQ(errors[0].where, "optim.beta at i.toml:2");
  EXPECT_EQ(errors[0].hint, "give a finite value");
  EXPECT_EQ(errors[1].where, "optim.eps at --set optim.eps");
  EXPECT_EQ(beta, 0.9);  // a rejected value leaves the default
}

TEST(Config, AllErrorsAreReportedAtOnceUnknownKeysFirst) {
  ConfigSource source = ConfigSource::from_string("bogus = 1\n[optim]\nlr = \"fast\"\n", "a.toml");
  source.apply_overrides({"model.n_layer=0", "model.n_layr=3"});
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  binder.fail("model.n_layer", "n_layer must be even", "use 2, 4, ...");
  std::vector<ErrorItem> errors = user_errors([&] { binder.finish(); });
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[0].what, "unknown key 'bogus'");
  EXPECT_EQ(errors[1].what, "unknown key 'model.n_layr'");
  EXPECT_EQ(errors[1].hint, "did you mean 'model.n_layer'?");
  EXPECT_EQ(errors[4].what, "n_layer must be even");
  EXPECT_EQ(errors[4].where, "model.n_layer at --set model.n_layer");
}

TEST(Config, StringChoicesSuggestAValidOne) {
  ConfigSource source = ConfigSource::from_string("kind = \"adamm\"\n", "c.toml");
  std::string kind = "sgd";
  ConfigBinder binder(source);
  binder.bind("kind", kind, {"sgd", "adamw", "adam"});
  ErrorItem error = user_error([&] { binder.finish(); });
  EXPECT_EQ(error.what, "invalid value \"adamm\"");
  EXPECT_NE(error.hint.find("valid: sgd, adamw, adam"), std::string::npos) << error.hint;
  EXPECT_NE(error.hint.find("did you mean"), std::string::npos) << error.hint;
}

enum class Optimizer { Sgd, AdamW };
constexpr std::pair<Optimizer, const char*> kOptimizerNames[] = {{Optimizer::Sgd, "sgd"},
                                                                 {Optimizer::AdamW, "adamw"}};

TEST(Config, AnEnumKeyTakesOneOfItsNamesAndKeepsItsDefaultWhenAbsent) {
  ConfigSource source = ConfigSource::from_string("kind = \"adamw\"\n", "c.toml");
  Optimizer kind = Optimizer::Sgd, other = Optimizer::AdamW;
  ConfigBinder binder(source);
  binder.bind_enum("kind", kind, kOptimizerNames);
  binder.bind_enum("other", other, kOptimizerNames);
  binder.finish();
  EXPECT_EQ(kind, Optimizer::AdamW);
  EXPECT_EQ(other, Optimizer::AdamW);
  EXPECT_EQ(binder.canonical(), "kind = \"adamw\"\nother = \"adamw\"\n");
}

TEST(Config, AnEnumKeyWithAnUnknownNameListsTheValidOnes) {
  ConfigSource source = ConfigSource::from_string("kind = \"adamm\"\n", "c.toml");
  Optimizer kind = Optimizer::Sgd;
  ConfigBinder binder(source);
  binder.bind_enum("kind", kind, kOptimizerNames);
  ErrorItem error = user_error([&] { binder.finish(); });
  EXPECT_EQ(error.what, "invalid value \"adamm\"");
  EXPECT_EQ(error.where, "kind at c.toml:1");
  EXPECT_EQ(error.hint, "did you mean 'adamw'? (valid: sgd, adamw)");
  EXPECT_EQ(kind, Optimizer::Sgd);
}

TEST(Config, CanonicalIsSortedValidToml) {
  ConfigSource source = ConfigSource::from_string(kToml, "tiny.toml");
  source.apply_overrides({"optim.lr=3e-4"});
  Fields f;
  ConfigBinder binder(source);
  bind_all(binder, f);
  binder.finish();
  const std::string expected =
      "model.n_layer = 2\n"
      "model.tied = true\n"
      "name = \"tiny\"\n"
      "optim.lr = 3e-04\n"
      "optim.warmup = 10\n"
      "rungs.0.steps = 5\n"
      "rungs.1.steps = 50\n";
  EXPECT_EQ(binder.canonical(), expected);
  // Parsing the canonical form and binding again gives the same canonical form.
  ConfigSource again = ConfigSource::from_string(binder.canonical(), "canonical");
  Fields g;
  ConfigBinder rebinder(again);
  bind_all(rebinder, g);
  rebinder.finish();
  EXPECT_EQ(rebinder.canonical(), expected);
}

TEST(Config, MalformedOverridesAreReportedTogether) {
  ConfigSource source = ConfigSource::from_string("", "o.toml");
  std::vector<ErrorItem> errors = user_errors([&] {
    source.apply_overrides({"noequals", "=1", "ok.key=1"});
  });
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].where, "--set");
  EXPECT_EQ(errors[0].hint, "write it as section.key=value");
}

TEST(Config, InvalidTomlNamesLineAndColumn) {
  ErrorItem error = user_error([] { ConfigSource::from_string("a = 1\nb = = 2\n", "bad.toml"); });
  EXPECT_NE(error.what.find("invalid TOML"), std::string::npos);
  EXPECT_EQ(error.where.rfind("bad.toml:2:", 0), 0u) << error.where;
}

TEST(Config, ReadsFilesAndNamesMissingOnes) {
  ScratchDir dir;
  faultline::testing::write_file(dir.file("c.toml"), "[optim]\nlr = 0.2\n");
  ConfigSource source = ConfigSource::from_file(dir.file("c.toml"));
  EXPECT_EQ(source.name(), dir.file("c.toml"));
  EXPECT_EQ(source.values().at("optim.lr").origin, dir.file("c.toml") + ":2");
  ErrorItem error = user_error([&] { ConfigSource::from_file(dir.file("none.toml")); });
  EXPECT_EQ(error.where, dir.file("none.toml"));
}

TEST(Config, ParseLiteralInfersTypes) {
  EXPECT_EQ(ConfigValue::parse_literal("true", "").type, ConfigValue::Type::Bool);
  EXPECT_EQ(ConfigValue::parse_literal(" 42 ", "").integer, 42);
  EXPECT_EQ(ConfigValue::parse_literal("1e-3", "").type, ConfigValue::Type::Float);
  EXPECT_EQ(ConfigValue::parse_literal("'quoted'", "").string, "quoted");
  EXPECT_EQ(ConfigValue::parse_literal("bare", "").type, ConfigValue::Type::String);
  EXPECT_EQ(ConfigValue::parse_literal("1.0", "").toml(), "1.0");
}

TEST(Config, RelativePathsInAFileAreTakenFromTheFilesFolder) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.file("recipes/data"));
  write_file(dir.file("recipes/r.toml"), "[data]\npath = \"data\"\n");
  ConfigSource source = ConfigSource::from_file(dir.file("recipes/r.toml"));
  std::string path;
  ConfigBinder binder(source);
  binder.bind_path("data.path", path, PathCheck::MustExist);
  binder.finish();
  EXPECT_EQ(path, std::filesystem::path(dir.file("recipes/data")).lexically_normal().string());
  EXPECT_NE(binder.canonical().find("data.path = \"" + path + "\""), std::string::npos)
      << "the resolved config stores the absolute path: " << binder.canonical();
}

TEST(Config, AMissingPathNamesTheKeyTheFileAndLineAndTheFolderItIsRelativeTo) {
  ScratchDir dir;
  write_file(dir.file("r.toml"), "[model]\nn_layer = 2\n[data]\npath = \"nowhere\"\n");
  ConfigSource source = ConfigSource::from_file(dir.file("r.toml"));
  std::string path;
  ConfigBinder binder(source);
  binder.bind_path("data.path", path, PathCheck::MustExist);
  binder.bind("model.n_layer", path);  // a second error is reported with the first
  auto items = user_errors([&] { binder.finish(); });
  ASSERT_EQ(items.size(), 2u);
  const auto& missing =
      items[0].what.find("does not exist") != std::string::npos ? items[0] : items[1];
  EXPECT_NE(missing.what.find(dir.file("nowhere")), std::string::npos) << missing.what;
  EXPECT_EQ(missing.where, "data.path at " + dir.file("r.toml") + ":4");
  EXPECT_NE(missing.hint.find("relative to the recipe's own folder"), std::string::npos);
}

TEST(Config, AnEmptyPathStaysEmptyAndAnAbsoluteOneIsKept) {
  ConfigSource source = ConfigSource::from_string("a = \"\"\nb = \"/tmp\"\n", "x.toml");
  std::string a = "default", b;
  ConfigBinder binder(source);
  binder.bind_path("a", a, PathCheck::MustExist);
  binder.bind_path("b", b, PathCheck::MustExist);
  binder.finish();
  EXPECT_EQ(a, "");
  EXPECT_EQ(b, "/tmp");
}

TEST(Config, APathGivenWithSetIsTakenFromTheCurrentDirectory) {
  ConfigSource source = ConfigSource::from_string("", "x.toml");
  source.apply_overrides({"data.path=some/where"});
  std::string path;
  ConfigBinder binder(source);
  binder.bind_path("data.path", path, PathCheck::None);
  binder.finish();
  EXPECT_EQ(path, (std::filesystem::current_path() / "some/where").string());
}

TEST(Config, AnUnknownSetKeyThatNamesAnOptionSuggestsTheOption) {
  ConfigSource source = ConfigSource::from_string("", "x.toml");
  source.apply_overrides({"timeout.step_s=3"});
  ConfigBinder binder(source);
  std::string ignored;
  binder.bind("train.steps", ignored);
  binder.suggest_options({"--db", "--step-timeout", "--ranks"});
  auto item = user_error([&] { binder.finish(); });
  EXPECT_EQ(item.what, "unknown key 'timeout.step_s'");
  EXPECT_NE(item.hint.find("use the option --step-timeout"), std::string::npos) << item.hint;
}

}  // namespace
}  // namespace faultline
