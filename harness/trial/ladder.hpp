// Smoke ladders (recipes/ladders/*.toml): the rungs of the golden rule, smallest first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::harness {

struct Rung {
  std::string name;
  int ranks = 1;       // 0: the recipe's own dist.ranks
  int64_t steps = 10;  // 0: the recipe's own train.steps
  double data_fraction = 1.0;
};

struct Ladder {
  std::string source;
  std::vector<Rung> rungs;
  // A stored reference (`faultline reference add`) every rung's loss is judged against; "": none.
  // `smoke --reference` overrides it.
  std::string reference;
};

// Reads and validates a ladder file; every problem in one UserError naming the file and key.
Ladder load_ladder(const std::string& path);

// A rung with the recipe's values filled in and duplicates of the rung before it dropped (a
// 1-rank recipe makes "own ranks x 100 steps" the same trial as "1 rank x 100 steps").
struct ResolvedRung {
  Rung rung;
  int ranks = 1;
  int64_t steps = 0;
};
std::vector<ResolvedRung> resolve_ladder(const Ladder& ladder, int recipe_ranks,
                                         int64_t recipe_steps);

}  // namespace faultline::harness
