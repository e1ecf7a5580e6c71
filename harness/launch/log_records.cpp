// std::regex (ECMAScript) has no named groups: names are taken out before compiling and kept by
// group index. A step record has only the fields the line gave; the others stay absent.
#include "harness/launch/log_records.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "common/error.hpp"
#include "common/event_names.hpp"
#include "common/text.hpp"

namespace faultline::harness {

namespace {

// "; did you mean 'x'?", or "" when nothing is close: ready to append to a hint.
std::string guess(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = did_you_mean(word, candidates);
  return match.empty() ? "" : "; " + match;
}

using nlohmann::json;

const std::vector<std::string> kStepGroups = {"step",      "loss",    "grad_norm", "lr",
                                              "step_ms",   "data_ms", "comm_ms",   "tokens",
                                              "mem_bytes", "skipped", "loss_scale"};
const std::vector<std::string> kCheckpointGroups = {"step", "path"};

// A number as the protocol spells it: JSON numbers, or "nan"/"inf"/"-inf"; anything else stays
// text (the record is then malformed, and counted as such).
json value_of(const std::string& text) {
  const std::string lower = lowercase(text);
  if (lower == "nan" || lower == "+nan" || lower == "-nan") return "nan";
  if (lower == "inf" || lower == "+inf" || lower == "infinity") return "inf";
  if (lower == "-inf" || lower == "-infinity") return "-inf";
  try {
    size_t used = 0;
    const double number = std::stod(text, &used);
    if (used == text.size()) return number;
  } catch (const std::exception&) {
  }
  return text;
}

// A loss scaler's `skipped`, as logs say it: true/false, yes/no, or a count of skipped steps
// (Megatron-LM's "number of skipped iterations: 1"; not 0 is skipped). Else the text, malformed.
json flag_of(const std::string& text) {
  const std::string lower = lowercase(text);
  if (lower == "true" || lower == "yes") return true;
  if (lower == "false" || lower == "no") return false;
  const json number = value_of(text);
  return number.is_number() ? json(number.get<double>() != 0) : json(text);
}

void compile_into(std::optional<std::pair<std::regex, std::vector<std::string>>>& out,
                  const std::string& source, const std::vector<std::string>& allowed,
                  const std::vector<std::string>& required, const std::string& where,
                  ErrorList& errors) {
  std::pair<std::string, std::vector<std::string>> stripped;
  try {
    stripped = strip_group_names(source);
    out.emplace(std::regex(stripped.first, std::regex::ECMAScript), stripped.second);
  } catch (const std::exception& error) {
    errors.add(std::string("not a regular expression: ") + error.what(), where,
               "write it as in Python, e.g. 'step (?P<step>\\d+) .*loss (?P<loss>\\S+)'");
    return;
  }
  for (const auto& name : stripped.second) {
    if (name.empty() || std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
    errors.add("unknown group '" + name + "'", where,
               "groups it may have: " + fmt::format("{}", fmt::join(allowed, ", ")) +
                   guess(name, allowed));
  }
  for (const auto& name : required)
    if (std::find(stripped.second.begin(), stripped.second.end(), name) == stripped.second.end())
      errors.add("the regular expression has no '" + name + "' group", where,
                 "name it with (?P<" + name + ">...)");
}

}  // namespace

std::pair<std::string, std::vector<std::string>> strip_group_names(const std::string& regex) {
  std::string plain;
  std::vector<std::string> groups;
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\' && i + 1 < regex.size()) {
      plain += regex.substr(i, 2);
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      plain += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      plain += c;
      // A ']' first in the class (or after '^') is a literal.
      if (i + 1 < regex.size() && regex[i + 1] == '^') plain += regex[++i];
      if (i + 1 < regex.size() && regex[i + 1] == ']') plain += regex[++i];
      continue;
    }
    if (c != '(') {
      plain += c;
      continue;
    }
    const bool named_p = regex.compare(i, 4, "(?P<") == 0;
    const bool named = named_p || (regex.compare(i, 3, "(?<") == 0 && i + 3 < regex.size() &&
                                   regex[i + 3] != '=' && regex[i + 3] != '!');
    if (named) {
      const size_t begin = i + (named_p ? 4 : 3);
      const size_t end = regex.find('>', begin);
      if (end == std::string::npos) throw std::invalid_argument("unterminated group name");
      groups.push_back(regex.substr(begin, end - begin));
      plain += '(';
      i = end;
      continue;
    }
    if (i + 1 < regex.size() && regex[i + 1] == '?') {  // (?: (?= (?!: no group
      plain += c;
      continue;
    }
    groups.emplace_back();
    plain += c;
  }
  return {plain, groups};
}

LogRecords LogRecords::compile(const std::string& step_regex, const std::string& checkpoint_regex,
                               const std::string& where, const std::string& base_dir) {
  ErrorList errors;
  LogRecords records;
  records.base_dir_ = base_dir;
  std::optional<std::pair<std::regex, std::vector<std::string>>> step, checkpoint;
  compile_into(step, step_regex, kStepGroups, {"step"}, "trainer.log_regex" + where, errors);
  if (!checkpoint_regex.empty())
    compile_into(checkpoint, checkpoint_regex, kCheckpointGroups, kCheckpointGroups,
                 "trainer.checkpoint_regex" + where, errors);
  errors.throw_if_any();
  records.step_ = Pattern{std::move(step->first), std::move(step->second)};
  if (checkpoint) records.checkpoint_ = Pattern{std::move(checkpoint->first), checkpoint->second};
  return records;
}

std::optional<std::string> LogRecords::translate(const std::string& line, int rank,
                                                 double t) const {
  std::smatch match;
  json record = {{"v", 1}, {"rank", rank}, {"t", t}};
  auto fill = [&](const Pattern& pattern) {
    for (size_t i = 0; i < pattern.groups.size(); ++i) {
      const auto& name = pattern.groups[i];
      if (name.empty() || !match[i + 1].matched) continue;
      const std::string text = match[i + 1].str();
      if (name == "path") {
        std::filesystem::path path = text;
        if (path.is_relative()) path = std::filesystem::path(base_dir_) / path;
        record["path"] = path.lexically_normal().string();
      } else {
        record[name] = name == "skipped" ? flag_of(text) : value_of(text);
      }
    }
  };
  if (checkpoint_ && std::regex_search(line, match, checkpoint_->regex)) {
    record["type"] = "event";
    record["name"] = kCheckpointEvent;
    fill(*checkpoint_);
    return record.dump();
  }
  if (!step_ || !std::regex_search(line, match, step_->regex)) return std::nullopt;
  record["type"] = "step";
  fill(*step_);
  return record.dump();
}

}  // namespace faultline::harness
