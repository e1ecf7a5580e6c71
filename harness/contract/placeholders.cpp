// {name} placeholders in a command trainer's argv: found, checked and filled.
#include "harness/contract/command_recipe.hpp"

#include <stdexcept>

namespace faultline::harness::contract {

std::string placeholder_text(const ConfigValue& value) {
  return value.type == ConfigValue::Type::String ? value.string : value.toml();
}

std::vector<std::string> placeholders_of(const std::string& pattern) {
  std::vector<std::string> names;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{{") == 0 || pattern.compare(i, 2, "}}") == 0) {
      ++i;
      continue;
    }
    if (pattern[i] != '{') continue;
    const size_t end = pattern.find('}', i);
    if (end == std::string::npos) break;
    names.push_back(pattern.substr(i + 1, end - i - 1));
    i = end;
  }
  return names;
}

std::string fill_placeholders(const std::string& pattern,
                              const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.compare(i, 2, "{{") == 0 || pattern.compare(i, 2, "}}") == 0) {
      out += pattern[i++];
      continue;
    }
    const size_t end = pattern[i] == '{' ? pattern.find('}', i) : std::string::npos;
    if (end == std::string::npos) {
      out += pattern[i];
      continue;
    }
    const std::string name = pattern.substr(i + 1, end - i - 1);
    auto it = values.find(name);
    if (it == values.end()) throw std::out_of_range(name);
    out += it->second;
    i = end;
  }
  return out;
}

}  // namespace faultline::harness::contract
