// Small text helpers shared by the readers of a command trainer's recipe (internal to contract/).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/config.hpp"
#include "common/text.hpp"

namespace faultline::harness::contract::detail {

// "; did you mean 'x'?", or "" when nothing is close: ready to append to a hint.
inline std::string guess(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = did_you_mean(word, candidates);
  return match.empty() ? "" : "; " + match;
}

// "trainer.command at r.toml:3", or "trainer.command in r.toml" when the recipe does not set it.
inline std::string where(const std::string& key, const ConfigSource& source) {
  auto it = source.values().find(key);
  return it == source.values().end() ? key + " in " + source.name()
                                     : key + " at " + it->second.origin;
}

}  // namespace faultline::harness::contract::detail
