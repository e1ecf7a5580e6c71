// A command trainer's own config file (`trainer.config_file`, JSON or TOML): its values read as
// dotted keys of the recipe, and a copy written with a trial's values (docs/external-trainers.md).
#pragma once

#include <map>
#include <string>

#include "common/config.hpp"

namespace faultline::harness::contract {

// Every leaf value of the file, by dotted path (`optim.lr`, `layers.0.width`). Throws a
// UserError naming the file for an unreadable, malformed or unsupported one (JSON, YAML and TOML
// are read).
std::map<std::string, ConfigValue> read_config_file(const std::string& path);

// The file's text with `values` at their keys; the rest as the file has it.
std::string rewrite_config_file(const std::string& path,
                                const std::map<std::string, ConfigValue>& values);

}  // namespace faultline::harness::contract
