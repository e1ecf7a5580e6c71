// Enum <-> name tables: one table of {value, name} pairs serves both to_string and parsing, so
// the two directions cannot drift apart.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

template <typename Enum, std::size_t N>
const char* name_of(const std::pair<Enum, const char*> (&table)[N], Enum value) {
  for (const auto& [each, name] : table)
    if (each == value) return name;
  return "?";
}

// nullopt for a text the table does not name.
template <typename Enum, std::size_t N>
std::optional<Enum> value_of(const std::pair<Enum, const char*> (&table)[N],
                             std::string_view text) {
  for (const auto& [value, name] : table)
    if (text == name) return value;
  return std::nullopt;
}

template <typename Enum, std::size_t N>
std::vector<std::string> names_of(const std::pair<Enum, const char*> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.push_back(entry.second);
  return names;
}

}  // namespace faultline
