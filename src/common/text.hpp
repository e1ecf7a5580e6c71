// Small text helpers: did-you-mean suggestions, prefixes, trimming, splitting (fmt::join joins).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// "; did you mean 'x'?" or "" — ready to append to a hint.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

// The option among `options` ("--step-timeout") whose words all appear in `key`'s words
// ("timeout.step_s": timeout, step, s); the one with most words wins; "" when none does.
std::string option_named_by(std::string_view key, const std::vector<std::string>& options);

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string trim(std::string_view text);
// ASCII letters made lower case ("NaN" → "nan"); other bytes as they are.
std::string lowercase(std::string_view text);
std::vector<std::string> split(std::string_view text, char separator);

// The whole text as an integer (base 10; nullopt past long long) or as a number as strtod reads
// it (inf and nan included, and inf for a number past double); nullopt for an empty text or
// trailing characters.
std::optional<long long> parse_integer(const std::string& text);
std::optional<double> parse_number(const std::string& text);

// A loss as a line of output shows it: four decimals (5.6014), or four significant digits once
// it has grown past them (2.437e+11), so a diverging run's lines keep their width.
std::string loss_text(double loss);

// A count with its noun, singular for one: "1 trial", "3 trials".
std::string counted(long long count, std::string_view noun);

// One argument as a POSIX shell reads it back: as it is when it is plain, else in single quotes
// (an empty argument is '').
std::string shell_word(std::string_view word);
// A command line a person can paste: the arguments as shell words, separated by spaces.
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace faultline
