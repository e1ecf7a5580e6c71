// Ladder files: the rungs, the reference a ladder may name, and errors naming the key.
#include "harness/trial/ladder.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "test_support.hpp"

using namespace faultline::harness;

namespace {

// In a directory of this process's own, removed at exit: parallel test runs do not share it.
std::string write(const std::string& name, const std::string& text) {
  static faultline::testing::ScratchDir dir;
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST(Ladder, ALadderMayNameItsReference) {
  const auto ladder =
      load_ladder(write("ref.toml", "reference = \"tiny-healthy\"\n[[rungs]]\nsteps = 100\n"));
  EXPECT_EQ(ladder.reference, "tiny-healthy");
  ASSERT_EQ(ladder.rungs.size(), 1u);
  EXPECT_EQ(ladder.rungs[0].steps, 100);
  EXPECT_EQ(load_ladder(FAULTLINE_SOURCE_DIR "/recipes/ladders/default.toml").reference, "");
}

TEST(Ladder, AReferenceThatIsNoStringIsAnErrorNamingTheKey) {
  try {
    load_ladder(write("bad.toml", "reference = 3\n[[rungs]]\nsteps = 10\n"));
    FAIL() << "a number is no reference name";
  } catch (const faultline::UserError& error) {
    EXPECT_NE(std::string(error.what()).find("reference"), std::string::npos) << error.what();
  }
}

TEST(Ladder, ALauncherSectionIsAnErrorThatSaysItBelongsInTheRecipe) {
  const auto items = faultline::testing::user_errors([] {
    load_ladder(write("launcher.toml",
                      "[launcher]\nkind = \"slurm\"\n[[rungs]]\nsteps = 10\n"
                      "stepz = 5\n"));
  });
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].what, "unknown key 'rungs.0.stepz'");
  EXPECT_EQ(items[1].what, "unknown key 'launcher.kind'");
  EXPECT_NE(items[1].where.find("launcher.toml:2"), std::string::npos) << items[1].where;
  EXPECT_EQ(items[1].hint, "[launcher] belongs in the recipe given with -c, not in the ladder");
}

// A rung trains on a share of the data: 0 and 2 are both refused, with the same words.
TEST(Ladder, ADataFractionOutsideZeroToOneIsRefusedAsSuch) {
  const auto items = faultline::testing::user_errors([] {
    load_ladder(write("fraction.toml",
                      "[[rungs]]\nsteps = 10\ndata_fraction = 2\n"
                      "[[rungs]]\nsteps = 10\ndata_fraction = 0\n"
                      "[[rungs]]\nsteps = 10\ndata_fraction = 0.25\n"));
  });
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].what, "data_fraction 2 is not in (0, 1]");
  EXPECT_EQ(items[1].what, "data_fraction 0 is not in (0, 1]");
  EXPECT_EQ(items[1].hint, "a share of the data: above 0, at most 1");
}
