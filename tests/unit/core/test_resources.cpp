// Tests for src/common/resources.cpp: the share directory found from the executable's place (the
// build tree's build/share/faultline here), recipes by name, and the errors that list names.
#include "common/resources.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "test_support.hpp"

namespace faultline {
namespace {

namespace fs = std::filesystem;
using faultline::testing::ScratchDir;
using faultline::testing::user_error;
using faultline::testing::write_file;

// Restores FAULTLINE_SHARE at scope end, so one test's value never leaks into the next.
class ShareEnv {
 public:
  explicit ShareEnv(const std::string& value) {
    if (const char* old = std::getenv("FAULTLINE_SHARE")) old_ = old;
    setenv("FAULTLINE_SHARE", value.c_str(), 1);
  }
  ~ShareEnv() {
    if (old_.empty())
      unsetenv("FAULTLINE_SHARE");
    else
      setenv("FAULTLINE_SHARE", old_.c_str(), 1);
  }

 private:
  std::string old_;
};

TEST(Resources, TheBuildTreesShareDirectoryHoldsTheSourceRecipes) {
  const fs::path share = share_dir();
  EXPECT_EQ(fs::canonical(share / "recipes/train/tiny.toml"),
            fs::canonical(fs::path(FAULTLINE_SOURCE_DIR) / "recipes/train/tiny.toml"));
}

TEST(Resources, AnInstalledRecipeIsFoundByNameWithOrWithoutItsExtension) {
  const std::string by_name = resolve_recipe("tiny", RecipeKind::Train, "-c");
  EXPECT_EQ(by_name, resolve_recipe("tiny.toml", RecipeKind::Train, "-c"));
  EXPECT_TRUE(fs::path(by_name).is_absolute());
  EXPECT_EQ(fs::path(by_name).filename(), "tiny.toml");
  EXPECT_EQ(
      fs::path(resolve_recipe("default", RecipeKind::Ladder, "--ladder")).parent_path().filename(),
      "ladders");
}

TEST(Resources, AnExistingFileWinsAndComesBackAbsolute) {
  ScratchDir dir;
  write_file(dir.file("tiny"), "[train]\nsteps = 3\n");
  const auto old = fs::current_path();
  fs::current_path(dir.path());
  const std::string resolved = resolve_recipe("tiny", RecipeKind::Train, "-c");
  fs::current_path(old);
  EXPECT_EQ(resolved, fs::path(dir.file("tiny")).lexically_normal().string());
}

TEST(Resources, AnUnknownNameListsTheInstalledOnesAndGuesses) {
  auto item = user_error([] { resolve_recipe("tinny", RecipeKind::Train, "-c"); });
  EXPECT_EQ(item.what, "no recipe file or installed recipe named 'tinny'");
  EXPECT_EQ(item.where, "-c");
  EXPECT_NE(item.hint.find("did you mean 'tiny'?"), std::string::npos) << item.hint;
  EXPECT_NE(item.hint.find("small, tiny"), std::string::npos) << item.hint;
}

TEST(Resources, AMissingPathIsNotTakenForAName) {
  auto item = user_error([] { resolve_recipe("no/such.toml", RecipeKind::Train, "-c"); });
  EXPECT_EQ(item.what, "cannot read recipe file");
  EXPECT_EQ(item.where, "no/such.toml (-c)");
}

TEST(Resources, FaultlineShareOverridesTheExecutablesPlace) {
  ScratchDir dir;
  fs::create_directories(dir.file("recipes/train"));
  write_file(dir.file("recipes/train/mine.toml"), "");
  ShareEnv env(dir.path());
  EXPECT_EQ(resolve_recipe("mine", RecipeKind::Train, "-c"),
            fs::canonical(dir.file("recipes/train/mine.toml")).string());
  EXPECT_EQ(installed_recipes(RecipeKind::Train), std::vector<std::string>{"mine"});
}

TEST(Resources, AFaultlineShareWithoutRecipesIsAClearError) {
  ScratchDir dir;
  ShareEnv env(dir.path());
  auto item = user_error([] { share_dir(); });
  EXPECT_EQ(item.what, "FAULTLINE_SHARE has no recipes/ folder");
  EXPECT_EQ(item.where, dir.path());
}

TEST(Resources, AMissingOwnFileNamesItsPath) {
  auto item = user_error([] { share_file("recipes/ladders/none.toml"); });
  EXPECT_EQ(item.what, "faultline's own file is missing");
  EXPECT_NE(item.where.find("recipes/ladders/none.toml"), std::string::npos);
}

}  // namespace
}  // namespace faultline
