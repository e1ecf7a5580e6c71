// Number checks for command-line options, and the hint that follows a usage mistake.
#include "cli/option_checks.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "common/text.hpp"

namespace faultline::cli {

namespace {

// A number an option takes: finite (strtod reads "inf" and "nan" too).
std::optional<double> finite_number(const std::string& text) {
  const auto value = parse_number(text);
  return value && std::isfinite(*value) ? value : std::nullopt;
}

// The text as given, quoted when it is not a number at all.
std::string shown(const std::string& text, bool is_number) {
  return is_number ? text : "'" + text + "'";
}

// CLI11 puts the option's name in front: "--steps: -3 is not an integer >= 1".
// `brief` is what --help shows after the type: INT:>=1.
CLI::Validator integer_check(long long min, long long max, const std::string& valid,
                             const std::string& brief) {
  return CLI::Validator(
      [min, max, valid](std::string& text) -> std::string {
        const auto value = parse_integer(text);
        if (value && *value >= min && *value <= max) return "";
        return fmt::format("{} is not {}", shown(text, value.has_value()), valid);
      },
      brief);
}

enum class Bound { Open, Closed };

CLI::Validator number_check(double min, Bound bound, const std::string& valid,
                            const std::string& brief) {
  return CLI::Validator(
      [min, bound, valid](std::string& text) -> std::string {
        const auto value = finite_number(text);
        if (value && (*value > min || (bound == Bound::Closed && *value == min))) return "";
        return fmt::format("{} is not {}", shown(text, value.has_value()), valid);
      },
      brief);
}

}  // namespace

CLI::Validator at_least(long long min) {
  return integer_check(min, std::numeric_limits<long long>::max(),
                       fmt::format("an integer >= {}", min), fmt::format(">={}", min));
}

CLI::Validator between(long long min, long long max) {
  return integer_check(min, max, fmt::format("an integer in [{}, {}]", min, max),
                       fmt::format("[{},{}]", min, max));
}

CLI::Validator above_zero() {
  return number_check(0, Bound::Open, "a number > 0", ">0");
}

CLI::Validator not_negative() {
  return number_check(0, Bound::Closed, "a number >= 0", ">=0");
}

std::optional<UnknownCommand> unknown_command(const CLI::App& app,
                                              const std::vector<std::string>& words) {
  std::vector<std::string> commands;
  for (const CLI::App* command : app.get_subcommands({})) commands.push_back(command->get_name());
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.rfind("-", 0) == 0) {
      // --db x.db: its value is not the command; --db=x.db and flags carry none.
      const CLI::Option* option = app.get_option_no_throw(word.substr(0, word.find('=')));
      if (option && word.find('=') == std::string::npos && option->get_expected_min() > 0) ++i;
      continue;
    }
    if (std::find(commands.begin(), commands.end(), word) != commands.end()) return std::nullopt;
    const std::string guess = closest_match(word, commands);
    return UnknownCommand{word, (guess.empty() ? "" : "did you mean '" + guess + "'? ") +
                                    fmt::format("the commands: {} (see `faultline --help`)",
                                                fmt::join(commands, ", "))};
  }
  return std::nullopt;
}

std::string usage_hint(const CLI::App& app) {
  std::string path = app.get_name();
  const CLI::App* at = &app;
  for (auto subcommands = at->get_subcommands(); !subcommands.empty();
       subcommands = at->get_subcommands()) {
    at = subcommands.back();
    path += " " + at->get_name();
  }
  return fmt::format("see `{} --help`", path);
}

}  // namespace faultline::cli
