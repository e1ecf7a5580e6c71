// Test support: a recipe or script edited in a test, one replacement that must find its target
// (a test whose edit silently missed would pass for the wrong reason).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace faultline::testing {

inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

}  // namespace faultline::testing
