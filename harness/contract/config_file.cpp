// JSON through nlohmann's flatten/unflatten (JSON pointers ↔ dotted keys, arrays kept), TOML
// through the config module.
#include "harness/contract/config_file.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"

namespace faultline::harness::contract {

namespace {

using nlohmann::json;

enum class Format { Json, Toml };

Format format_of(const std::string& path) {
  const auto extension = std::filesystem::path(path).extension().string();
  if (extension == ".json") return Format::Json;
  if (extension == ".toml") return Format::Toml;
  throw UserError("unsupported config file format '" + extension + "'",
                  "trainer.config_file = " + path,
                  extension == ".yaml" || extension == ".yml"
                      ? "YAML is not supported yet: give the trainer a JSON or TOML copy"
                      : "use a .json or .toml file");
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
  return join(parts, ".");
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
  if (format_of(path) == Format::Toml) return ConfigSource::from_file(path).values();
  std::map<std::string, ConfigValue> values;
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
  if (format_of(path) == Format::Toml) return rewrite_toml(path, values);
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
