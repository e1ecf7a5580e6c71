// Typed configuration: a TOML file flattened to dotted keys, `--set key=value` overrides on top,
// and a binder that maps keys onto struct fields, collecting every error before throwing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/enum_names.hpp"
#include "common/error.hpp"

namespace faultline {

struct ConfigValue {
  enum class Type { Bool, Int, Float, String };
  Type type = Type::String;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string string;
  std::string origin;    // "file.toml:12" or "--set"
  std::string base_dir;  // what a relative path in it is relative to: the file's folder, or the
                         // current directory for --set

  static ConfigValue parse_literal(std::string_view text, std::string origin);
  std::string type_name() const;
  std::string toml() const;  // the value as a TOML literal
};

// Flattened key → value map. Arrays of tables flatten with their index: `rungs.0.steps`.
class ConfigSource {
 public:
  static ConfigSource from_file(const std::string& path);
  static ConfigSource from_string(std::string_view toml_text, const std::string& name);

  // Applies `key=value` assignments; a malformed one is reported with the others, all at once.
  void apply_overrides(const std::vector<std::string>& assignments);
  void set(const std::string& key, ConfigValue value) { values_[key] = std::move(value); }
  // The keys under `section.` only, or every key but those: a section another module binds.
  ConfigSource only(const std::string& section) const;
  ConfigSource without(const std::string& section) const;

  const std::map<std::string, ConfigValue>& values() const { return values_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::map<std::string, ConfigValue> values_;
};

// The TOML file at `path` with the value at each dotted key of `values` (`optim.lr`,
// `layers.0.width`) replaced, formatted by toml++: a trainer's own config file, written for one
// trial. A key the file does not have is a UserError naming it.
std::string rewrite_toml(const std::string& path, const std::map<std::string, ConfigValue>& values);

// What bind_path checks beyond the type.
enum class PathCheck { None, MustExist };

template <typename T>
struct Range {
  std::optional<T> min;
  std::optional<T> max;
};

// Binds keys to fields. Missing keys keep the field's default. finish() reports unknown keys
// (with a did-you-mean) and every type or range error in one UserError.
class ConfigBinder {
 public:
  explicit ConfigBinder(const ConfigSource& source) : source_(source) {}

  void bind(const std::string& key, bool& field);
  void bind(const std::string& key, int64_t& field, Range<int64_t> range = {});
  void bind(const std::string& key, int& field, Range<int64_t> range = {});
  void bind(const std::string& key, double& field, Range<double> range = {});
  void bind(const std::string& key, std::string& field,
            const std::vector<std::string>& choices = {});
  // A key whose value is one of an enum's names (enum_names.hpp): an invalid name is an error
  // listing the valid ones, and the field keeps its default.
  template <typename Enum, std::size_t N>
  void bind_enum(const std::string& key, Enum& field,
                 const std::pair<Enum, const char*> (&names)[N]) {
    std::string text = name_of(names, field);
    bind(key, text, names_of(names));
    if (const auto value = value_of(names, text)) field = *value;
  }
  // A path: made absolute against the folder of the file that set it (or the current
  // directory for --set), so a recipe works from any directory; "" stays "".
  void bind_path(const std::string& key, std::string& field, PathCheck check);

  // CLI options to suggest for an unknown key that names one ("timeout.step_s" →
  // --step-timeout): a user who writes --set for what is an option learns the option.
  void suggest_options(std::vector<std::string> options) { options_ = std::move(options); }

  // Reports a cross-field problem found after binding, e.g. "n_embd must divide by n_head".
  void fail(const std::string& key, std::string what, std::string hint = "");
  bool has(const std::string& key) const { return source_.values().count(key) > 0; }
  // Keys under `section.` are bound elsewhere (the harness's [launcher]): not unknown here, and
  // not part of canonical().
  void accept_section(const std::string& section) { sections_.push_back(section + "."); }

  void finish();

  // Every bound key with its resolved value, sorted, one `key = value` line each (valid TOML).
  std::string canonical() const;

 private:
  const ConfigValue* lookup(const std::string& key);
  std::string where(const std::string& key, const ConfigValue* value) const;

  const ConfigSource& source_;
  std::map<std::string, std::string> resolved_;  // key → TOML literal
  std::vector<std::string> known_;
  std::vector<std::string> options_;
  std::vector<std::string> sections_;
  ErrorList errors_;
};

}  // namespace faultline
