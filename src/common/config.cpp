// The only place that includes toml++: parses TOML into ConfigSource and binds keys to fields.
#include "common/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/text.hpp"

namespace faultline {

namespace {

std::string quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string format_real(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  // Shortest text that reads back to the same double ("10", not "1e+01").
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

std::string origin_of(const toml::node& node, const std::string& name) {
  const auto& begin = node.source().begin;
  return begin.line > 0 ? name + ":" + std::to_string(begin.line) : name;
}

void flatten(const toml::node& node, const std::string& prefix, const std::string& name,
             const std::string& base_dir, std::map<std::string, ConfigValue>& out,
             ErrorList& errors) {
  if (const auto* table = node.as_table()) {
    for (const auto& [key, child] : *table) {
      std::string path =
          prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
      flatten(child, path, name, base_dir, out, errors);
    }
    return;
  }
  if (const auto* array = node.as_array()) {
    for (size_t i = 0; i < array->size(); ++i)
      flatten(*array->get(i), prefix + "." + std::to_string(i), name, base_dir, out, errors);
    return;
  }
  ConfigValue value;
  value.origin = origin_of(node, name);
  value.base_dir = base_dir;
  if (auto b = node.value_exact<bool>()) {
    value.type = ConfigValue::Type::Bool;
    value.boolean = *b;
  } else if (auto i = node.value_exact<int64_t>()) {
    value.type = ConfigValue::Type::Int;
    value.integer = *i;
  } else if (auto f = node.value_exact<double>()) {
    value.type = ConfigValue::Type::Float;
    value.real = *f;
  } else if (auto s = node.value_exact<std::string>()) {
    value.type = ConfigValue::Type::String;
    value.string = *s;
  } else {
    errors.add("unsupported value type for '" + prefix + "'", value.origin,
               "use a boolean, integer, float or string");
    return;
  }
  out[prefix] = std::move(value);
}

ConfigSource parse(std::string_view text, const std::string& name, const std::string& base_dir) {
  ConfigSource source;
  toml::table table;
  try {
    table = toml::parse(text, name);
  } catch (const toml::parse_error& error) {
    const auto& begin = error.source().begin;
    throw UserError("invalid TOML: " + std::string(error.description()),
                    name + ":" + std::to_string(begin.line) + ":" + std::to_string(begin.column),
                    "fix the syntax");
  }
  std::map<std::string, ConfigValue> values;
  ErrorList errors;
  flatten(table, "", name, base_dir, values, errors);
  errors.throw_if_any();
  for (auto& [key, value] : values) source.set(key, std::move(value));
  return source;
}

}  // namespace

ConfigValue ConfigValue::parse_literal(std::string_view text, std::string origin) {
  ConfigValue value;
  value.origin = std::move(origin);
  std::string literal = trim(text);
  if (literal == "true" || literal == "false") {
    value.type = Type::Bool;
    value.boolean = literal == "true";
    return value;
  }
  if (literal.size() >= 2 && (literal.front() == '"' || literal.front() == '\'') &&
      literal.back() == literal.front()) {
    value.type = Type::String;
    value.string = literal.substr(1, literal.size() - 2);
    return value;
  }
  if (const auto integer = parse_integer(literal)) {
    value.type = Type::Int;
    value.integer = *integer;
    return value;
  }
  if (const auto real = parse_number(literal)) {
    value.type = Type::Float;
    value.real = *real;
    return value;
  }
  value.type = Type::String;
  value.string = literal;
  return value;
}

std::string ConfigValue::type_name() const {
  switch (type) {
    case Type::Bool:
      return "boolean";
    case Type::Int:
      return "integer";
    case Type::Float:
      return "float";
    case Type::String:
      return "string";
  }
  return "value";
}

std::string ConfigValue::toml() const {
  switch (type) {
    case Type::Bool:
      return boolean ? "true" : "false";
    case Type::Int:
      return std::to_string(integer);
    case Type::Float:
      return format_real(real);
    case Type::String:
      return quote(string);
  }
  return "";
}

ConfigSource ConfigSource::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw UserError("cannot read config file", path, "check that the file exists and is readable");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const auto folder = std::filesystem::absolute(path).parent_path().lexically_normal();
  ConfigSource source = parse(buffer.str(), path, folder.string());
  source.name_ = path;
  return source;
}

ConfigSource ConfigSource::from_string(std::string_view toml_text, const std::string& name) {
  ConfigSource source = parse(toml_text, name, std::filesystem::current_path().string());
  source.name_ = name;
  return source;
}

void ConfigSource::apply_overrides(const std::vector<std::string>& assignments) {
  ErrorList errors;
  for (const auto& assignment : assignments) {
    auto equals = assignment.find('=');
    std::string key = equals == std::string::npos ? "" : trim(assignment.substr(0, equals));
    if (key.empty()) {
      errors.add("malformed override '" + assignment + "'", "--set",
                 "write it as section.key=value");
      continue;
    }
    values_[key] = ConfigValue::parse_literal(assignment.substr(equals + 1), "--set " + key);
    values_[key].base_dir = std::filesystem::current_path().string();
  }
  errors.throw_if_any();
}

const ConfigValue* ConfigBinder::lookup(const std::string& key) {
  known_.push_back(key);
  auto it = source_.values().find(key);
  return it == source_.values().end() ? nullptr : &it->second;
}

std::string ConfigBinder::where(const std::string& key, const ConfigValue* value) const {
  return value ? key + " at " + value->origin : key;
}

void ConfigBinder::bind(const std::string& key, bool& field) {
  if (const auto* value = lookup(key)) {
    if (value->type == ConfigValue::Type::Bool)
      field = value->boolean;
    else
      errors_.add("expected a boolean, got " + value->type_name() + " " + value->toml(),
                  where(key, value), "use true or false");
  }
  resolved_[key] = field ? "true" : "false";
}

void ConfigBinder::bind(const std::string& key, int64_t& field, Range<int64_t> range) {
  std::string expected = "an integer";
  if (range.min && range.max)
    expected += " in [" + std::to_string(*range.min) + ", " + std::to_string(*range.max) + "]";
  else if (range.min)
    expected += " >= " + std::to_string(*range.min);
  else if (range.max)
    expected += " <= " + std::to_string(*range.max);
  if (const auto* value = lookup(key)) {
    if (value->type != ConfigValue::Type::Int) {
      errors_.add("expected " + expected + ", got " + value->type_name() + " " + value->toml(),
                  where(key, value));
    } else if ((range.min && value->integer < *range.min) ||
               (range.max && value->integer > *range.max)) {
      errors_.add("value " + value->toml() + " is out of range", where(key, value),
                  "expected " + expected);
    } else {
      field = value->integer;
    }
  }
  resolved_[key] = std::to_string(field);
}

void ConfigBinder::bind(const std::string& key, int& field, Range<int64_t> range) {
  int64_t wide = field;
  if (!range.min) range.min = INT32_MIN;
  if (!range.max) range.max = INT32_MAX;
  bind(key, wide, range);
  field = static_cast<int>(wide);
}

void ConfigBinder::bind(const std::string& key, double& field, Range<double> range) {
  if (const auto* value = lookup(key)) {
    double real =
        value->type == ConfigValue::Type::Int ? static_cast<double>(value->integer) : value->real;
    if (value->type != ConfigValue::Type::Int && value->type != ConfigValue::Type::Float) {
      errors_.add("expected a number, got " + value->type_name() + " " + value->toml(),
                  where(key, value));
    } else if (std::isinf(real)) {
      // TOML's inf (or 1e400, which parses to it): no setting means it; a run would fail of it.
      errors_.add("value " + value->toml() + " is not a finite number", where(key, value),
                  "give a finite value");
    } else if ((range.min && !(real >= *range.min)) || (range.max && !(real <= *range.max))) {
      std::string hint = "expected a number";
      if (range.min) hint += " >= " + format_real(*range.min);
      if (range.max)
        hint += std::string(range.min ? " and" : "") + " <= " + format_real(*range.max);
      errors_.add("value " + value->toml() + " is out of range", where(key, value), hint);
    } else {
      field = real;
    }
  }
  resolved_[key] = format_real(field);
}

void ConfigBinder::bind(const std::string& key, std::string& field,
                        const std::vector<std::string>& choices) {
  if (const auto* value = lookup(key)) {
    // A --set value that looks like a number is still a fine string ("--set data.name=123").
    std::string text = value->type == ConfigValue::Type::String ? value->string : value->toml();
    bool from_override = starts_with(value->origin, "--set");
    if (value->type != ConfigValue::Type::String && !from_override) {
      errors_.add("expected a string, got " + value->type_name() + " " + value->toml(),
                  where(key, value), "quote it");
    } else if (!choices.empty() &&
               std::find(choices.begin(), choices.end(), text) == choices.end()) {
      std::string hint = "valid: " + fmt::format("{}", fmt::join(choices, ", "));
      std::string guess = did_you_mean(text, choices);
      if (!guess.empty()) hint = guess + " (" + hint + ")";
      errors_.add("invalid value \"" + text + "\"", where(key, value), hint);
    } else {
      field = text;
    }
  }
  resolved_[key] = quote(field);
}

void ConfigBinder::bind_path(const std::string& key, std::string& field, PathCheck check) {
  bind(key, field);
  auto it = source_.values().find(key);
  const ConfigValue* value = it == source_.values().end() ? nullptr : &it->second;
  if (!value || field.empty()) return;
  std::filesystem::path path = field;
  if (path.is_relative()) path = std::filesystem::path(value->base_dir) / path;
  field = path.lexically_normal().string();
  resolved_[key] = quote(field);
  std::error_code error;
  if (check == PathCheck::MustExist && !std::filesystem::exists(field, error))
    errors_.add("path does not exist: " + field, where(key, value),
                starts_with(value->origin, "--set")
                    ? "a path given with --set is relative to the current directory"
                    : "a relative path in a recipe is relative to the recipe's own folder (" +
                          value->base_dir + ")");
}

void ConfigBinder::fail(const std::string& key, std::string what, std::string hint) {
  auto it = source_.values().find(key);
  errors_.add(std::move(what), where(key, it == source_.values().end() ? nullptr : &it->second),
              std::move(hint));
}

void ConfigBinder::finish() {
  std::set<std::string> known(known_.begin(), known_.end());
  ErrorList unknown;
  std::set<std::string> arrays;
  for (const auto& [key, value] : source_.values()) {
    if (known.count(key)) continue;
    if (std::any_of(sections_.begin(), sections_.end(),
                    [&key = key](const std::string& section) { return starts_with(key, section); }))
      continue;
    // An array where one value goes ([1, 2], or [[train]]) is flattened to key.0, key.1: said as
    // what it is, not as an unknown key.
    std::string single;
    for (const auto& part : split(key, '.'))
      if (part.empty() || !std::all_of(part.begin(), part.end(), ::isdigit))
        single += (single.empty() ? "" : ".") + part;
    if (single != key && known.count(single)) {
      if (!arrays.insert(single).second) continue;  // once per key, not per element
      unknown.add("'" + single + "' is written as an array", value.origin,
                  "it takes one value: write " + single.substr(single.rfind('.') + 1) +
                      " = <value> in its [" + single.substr(0, single.rfind('.')) + "] table");
      continue;
    }
    std::string hint = did_you_mean(key, known_);
    // A key written outside its table (`steps = 5` above [train]): the key of that name.
    if (hint.empty() && key.find('.') == std::string::npos) {
      std::vector<std::string> in_tables;
      for (const auto& name : known)
        if (ends_with(name, "." + key)) in_tables.push_back(name);
      if (in_tables.size() == 1)
        hint = "did you mean '" + in_tables.front() + "' (" + key + " in its [" +
               in_tables.front().substr(0, in_tables.front().rfind('.')) + "] table)?";
    }
    if (auto option = option_named_by(key, options_); !option.empty())
      hint =
          hint.empty() ? "for that, use the option " + option : hint + " or the option " + option;
    unknown.add("unknown key '" + key + "'", value.origin, hint);
  }
  ErrorList all = unknown;
  for (const auto& item : errors_.items()) all.add(item.what, item.where, item.hint);
  all.throw_if_any();
}

ConfigSource ConfigSource::only(const std::string& section) const {
  ConfigSource kept = *this;
  kept.values_.clear();
  for (const auto& [key, value] : values_)
    if (starts_with(key, section + ".")) kept.values_.emplace(key, value);
  return kept;
}

ConfigSource ConfigSource::without(const std::string& section) const {
  ConfigSource kept = *this;
  for (const auto& [key, value] : values_)
    if (starts_with(key, section + ".")) kept.values_.erase(key);
  return kept;
}

std::string ConfigBinder::canonical() const {
  std::string out;
  for (const auto& [key, literal] : resolved_) out += key + " = " + literal + "\n";
  return out;
}

}  // namespace faultline
