// A TOML config file rewritten with other values at some of its keys, keeping its structure
// (tables, arrays, the keys not given) as toml++ formats it.
#include <toml++/toml.h>
#include <cstdlib>
#include <sstream>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/text.hpp"

namespace faultline {

namespace {

// The node at `path` (dotted, array elements by index), or null.
toml::node* node_at(toml::table& root, const std::vector<std::string>& path) {
  toml::node* node = &root;
  for (const auto& part : path) {
    if (auto* table = node->as_table()) {
      node = table->get(part);
    } else if (auto* array = node->as_array()) {
      char* end = nullptr;
      const unsigned long index = std::strtoul(part.c_str(), &end, 10);
      node = *end == '\0' && index < array->size() ? array->get(index) : nullptr;
    } else {
      return nullptr;
    }
    if (!node) return nullptr;
  }
  return node;
}

void assign(toml::node& node, const ConfigValue& value) {
  switch (value.type) {
    case ConfigValue::Type::Bool:
      if (auto* slot = node.as_boolean()) *slot = value.boolean;
      return;
    case ConfigValue::Type::Int:
      if (auto* slot = node.as_integer()) *slot = value.integer;
      if (auto* slot = node.as_floating_point()) *slot = static_cast<double>(value.integer);
      return;
    case ConfigValue::Type::Float:
      if (auto* slot = node.as_floating_point()) *slot = value.real;
      return;
    case ConfigValue::Type::String:
      if (auto* slot = node.as_string()) *slot = value.string;
      return;
  }
}

}  // namespace

std::string rewrite_toml(const std::string& path,
                         const std::map<std::string, ConfigValue>& values) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    throw UserError("invalid TOML: " + std::string(error.description()), path, "fix the syntax");
  }
  ErrorList errors;
  for (const auto& [key, value] : values) {
    toml::node* node = node_at(root, split(key, '.'));
    if (!node || node->is_table() || node->is_array()) {
      errors.add("no value '" + key + "' in the trainer's config file", path);
      continue;
    }
    assign(*node, value);
  }
  errors.throw_if_any();
  std::ostringstream out;
  out << toml::toml_formatter(root) << "\n";
  return out.str();
}

}  // namespace faultline
