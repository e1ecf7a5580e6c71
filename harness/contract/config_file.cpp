// JSON through nlohmann's flatten/unflatten (JSON pointers ↔ dotted keys, arrays kept), YAML
// through yaml-cpp (the copy keeps the structure, not the comments), TOML through the config
// module.
#include "harness/contract/config_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace faultline::harness::contract {

namespace {

using nlohmann::json;

enum class Format { Json, Yaml, Toml };

Format format_of(const std::string& path) {
  const auto extension = std::filesystem::path(path).extension().string();
  if (extension == ".json") return Format::Json;
  if (extension == ".toml") return Format::Toml;
  if (extension == ".yaml" || extension == ".yml") return Format::Yaml;
  throw UserError("unsupported config file format '" + extension + "'",
                  "trainer.config_file = " + path, "use a .json, .yaml, .yml or .toml file");
}

YAML::Node read_yaml(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::Exception& error) {
    throw UserError(std::string("invalid YAML: ") + error.what(), path, "fix the syntax");
  }
}

// A plain YAML scalar typed as YAML 1.2's core schema reads it; a quoted one is a string.
ConfigValue value_of(const YAML::Node& node, const std::string& origin) {
  ConfigValue value;
  value.origin = origin;
  const std::string text = node.Scalar();
  value.type = ConfigValue::Type::String;
  value.string = text;
  if (node.Tag() == "!") return value;
  if (text == "true" || text == "false") {
    value.type = ConfigValue::Type::Bool;
    value.boolean = text == "true";
    return value;
  }
  // An integer past 64 bits is read as a float, as a JSON file's is (it was clamped to 2^63 - 1).
  if (const auto integer = parse_integer(text)) {
    value.type = ConfigValue::Type::Int;
    value.integer = *integer;
  } else if (const auto real = parse_number(text)) {
    value.type = ConfigValue::Type::Float;
    value.real = *real;
  }
  return value;
}

void flatten_yaml(const YAML::Node& node, const std::string& prefix, const std::string& path,
                  std::map<std::string, ConfigValue>& out) {
  auto child_key = [&](const std::string& part) {
    return prefix.empty() ? part : prefix + "." + part;
  };
  if (node.IsMap()) {
    for (const auto& entry : node)
      flatten_yaml(entry.second, child_key(entry.first.Scalar()), path, out);
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      flatten_yaml(node[i], child_key(std::to_string(i)), path, out);
  } else if (node.IsScalar()) {
    out[prefix] = value_of(node, path + " " + prefix);
  }
}

// Whether a plain scalar of `text` would be read as something other than a string.
bool reads_as_non_string(const std::string& text) {
  YAML::Node plain = YAML::Load(text.empty() ? "''" : text);
  return plain.IsNull() || value_of(plain, "").type != ConfigValue::Type::String;
}

// Marks every string that would not read back as one ("7", "true") as !!str: yaml-cpp emits
// scalars plain, and the copy must say what the file said.
void keep_strings(YAML::Node node) {
  if (node.IsMap()) {
    for (auto entry : node) keep_strings(entry.second);
  } else if (node.IsSequence()) {
    for (auto element : node) keep_strings(element);
  } else if (node.IsScalar() && node.Tag() == "!" && reads_as_non_string(node.Scalar())) {
    node.SetTag("tag:yaml.org,2002:str");
  }
}

// The node at a dotted key (a handle into `root`), or an undefined node.
YAML::Node yaml_at(const YAML::Node& root, const std::string& key) {
  YAML::Node node = root;
  for (const auto& part : split(key, '.')) {
    YAML::Node next;
    if (node.IsMap() && node[part])
      next.reset(node[part]);
    else if (node.IsSequence() && !part.empty() &&
             part.find_first_not_of("0123456789") == std::string::npos &&
             std::stoul(part) < node.size())
      next.reset(node[std::stoul(part)]);
    else
      return YAML::Node(YAML::NodeType::Undefined);
    node.reset(next);
  }
  return node;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read the trainer's config file", path, "check the path");
  try {
    return json::parse(in);
  } catch (const json::parse_error& error) {
    throw UserError(std::string("invalid JSON: ") + error.what(), path, "fix the syntax");
  }
}

// "/optim/lr" → "optim.lr" (RFC 6901 escapes undone).
std::string dotted(const std::string& pointer) {
  std::vector<std::string> parts;
  for (auto part : split(pointer.substr(1), '/')) {
    for (size_t at; (at = part.find("~1")) != std::string::npos;) part.replace(at, 2, "/");
    for (size_t at; (at = part.find("~0")) != std::string::npos;) part.replace(at, 2, "~");
    parts.push_back(part);
  }
  return fmt::format("{}", fmt::join(parts, "."));
}

json json_of(const ConfigValue& value) {
  switch (value.type) {
    case ConfigValue::Type::Bool:
      return value.boolean;
    case ConfigValue::Type::Int:
      return value.integer;
    case ConfigValue::Type::Float:
      return value.real;
    case ConfigValue::Type::String:
      return value.string;
  }
  return nullptr;
}

}  // namespace

std::map<std::string, ConfigValue> read_config_file(const std::string& path) {
  const Format format = format_of(path);
  if (format == Format::Toml) return ConfigSource::from_file(path).values();
  std::map<std::string, ConfigValue> values;
  if (format == Format::Yaml) {
    flatten_yaml(read_yaml(path), "", path, values);
    return values;
  }
  const json flat = read_json(path).flatten();  // kept: items() refers to it
  for (const auto& [pointer, leaf] : flat.items()) {
    ConfigValue value;
    value.origin = path + " " + pointer;
    if (leaf.is_boolean()) {
      value.type = ConfigValue::Type::Bool;
      value.boolean = leaf.get<bool>();
    } else if (leaf.is_number_integer()) {
      value.type = ConfigValue::Type::Int;
      value.integer = leaf.get<int64_t>();
    } else if (leaf.is_number()) {
      value.type = ConfigValue::Type::Float;
      value.real = leaf.get<double>();
    } else if (leaf.is_string()) {
      value.type = ConfigValue::Type::String;
      value.string = leaf.get<std::string>();
    } else {
      continue;  // null, empty arrays and objects: nothing a search can change
    }
    values[dotted(pointer)] = value;
  }
  return values;
}

std::string rewrite_config_file(const std::string& path,
                                const std::map<std::string, ConfigValue>& values) {
  const Format format = format_of(path);
  if (format == Format::Toml) return rewrite_toml(path, values);
  if (format == Format::Yaml) {
    YAML::Node root = read_yaml(path);
    ErrorList errors;
    for (const auto& [key, value] : values) {
      YAML::Node node = yaml_at(root, key);
      if (!node.IsDefined() || !node.IsScalar()) {
        errors.add("no value '" + key + "' in the trainer's config file", path);
        continue;
      }
      if (value.type == ConfigValue::Type::String) {
        node = value.string;
        if (reads_as_non_string(value.string)) node.SetTag("tag:yaml.org,2002:str");
      } else {
        node = value.toml();
      }
    }
    errors.throw_if_any();
    keep_strings(root);
    YAML::Emitter out;
    out << root;
    return std::string(out.c_str()) + "\n";
  }
  json flat = read_json(path).flatten();
  std::map<std::string, std::string> pointers;
  for (const auto& [pointer, leaf] : flat.items()) pointers[dotted(pointer)] = pointer;
  ErrorList errors;
  for (const auto& [key, value] : values) {
    auto it = pointers.find(key);
    if (it == pointers.end()) {
      errors.add("no value '" + key + "' in the trainer's config file", path);
      continue;
    }
    flat[it->second] = json_of(value);
  }
  errors.throw_if_any();
  return flat.unflatten().dump(2) + "\n";
}

}  // namespace faultline::harness::contract
