// Ladder files through the common config binder: rungs are an array of tables, which the config
// layer flattens to rungs.<i>.<key>.
#include "harness/trial/ladder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace faultline::harness {

Ladder load_ladder(const std::string& path) {
  ConfigSource source = ConfigSource::from_file(path);
  std::set<int> indices;
  for (const auto& [key, value] : source.values()) {
    if (key.rfind("rungs.", 0) != 0) continue;
    auto dot = key.find('.', 6);
    try {
      indices.insert(std::stoi(key.substr(6, dot - 6)));
    } catch (const std::exception&) {
    }
  }
  Ladder ladder;
  ladder.source = path;
  ConfigBinder binder(source);
  binder.bind("reference", ladder.reference);
  for (int index : indices) {
    Rung rung;
    const std::string prefix = "rungs." + std::to_string(index) + ".";
    rung.name = "rung " + std::to_string(index + 1);
    binder.bind(prefix + "name", rung.name);
    binder.bind(prefix + "ranks", rung.ranks, {0, 4096});
    binder.bind(prefix + "steps", rung.steps, {0, {}});
    // (0, 1]: checked here, as a bound of the binder's would say 0 is fine.
    binder.bind(prefix + "data_fraction", rung.data_fraction);
    if (!(rung.data_fraction > 0 && rung.data_fraction <= 1))
      binder.fail(prefix + "data_fraction",
                  fmt::format("data_fraction {} is not in (0, 1]", rung.data_fraction),
                  "a share of the data: above 0, at most 1");
    ladder.rungs.push_back(rung);
  }
  // A ladder says which rungs to climb; how their ranks start is the recipe's to say.
  binder.accept_section("launcher");
  for (const auto& [key, value] : source.values())
    if (starts_with(key, "launcher."))
      binder.fail(key, "unknown key '" + key + "'",
                  "[launcher] belongs in the recipe given with -c, not in the ladder");
  binder.finish();
  if (ladder.rungs.empty())
    throw UserError("ladder has no rungs", path,
                    "add [[rungs]] tables with ranks, steps, data_fraction");
  return ladder;
}

std::vector<ResolvedRung> resolve_ladder(const Ladder& ladder, int recipe_ranks,
                                         int64_t recipe_steps) {
  std::vector<ResolvedRung> resolved;
  for (const auto& rung : ladder.rungs) {
    ResolvedRung next{rung, rung.ranks == 0 ? recipe_ranks : rung.ranks,
                      rung.steps == 0 ? recipe_steps : std::min(rung.steps, recipe_steps)};
    if (!resolved.empty()) {
      const auto& last = resolved.back();
      if (last.ranks == next.ranks && last.steps == next.steps &&
          last.rung.data_fraction == next.rung.data_fraction)
        continue;
    }
    resolved.push_back(next);
  }
  return resolved;
}

}  // namespace faultline::harness
