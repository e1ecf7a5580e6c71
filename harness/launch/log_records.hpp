// A log-only trainer's own output read as protocol records: a regular expression with named
// groups over each line of a rank's log (docs/external-trainers.md). A line that does not match
// is the trainer's business and is ignored.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace faultline::harness {

class LogRecords {
 public:
  // `step_regex` needs a `step` group and may have loss, grad_norm, lr, step_ms, data_ms,
  // comm_ms, tokens, mem_bytes, skipped and loss_scale groups; `checkpoint_regex` ("" for none)
  // needs `step` and `path` (relative paths are relative to `base_dir`). Groups are written
  // (?P<name>...) as in Python, or (?<name>...). Throws one UserError naming `where` and the bad
  // key.
  static LogRecords compile(const std::string& step_regex, const std::string& checkpoint_regex,
                            const std::string& where, const std::string& base_dir);

  // The protocol line (a step record or a checkpoint event) `line` stands for, or nullopt.
  // A value that is no number is passed on as text, so the record is reported as malformed.
  std::optional<std::string> translate(const std::string& line, int rank, double t) const;

 private:
  struct Pattern {
    std::regex regex;
    std::vector<std::string> groups;  // by group index - 1; "" for an unnamed group
  };
  std::optional<Pattern> step_, checkpoint_;
  std::string base_dir_;
};

// `regex` with its named groups made plain, and the name of every capturing group in order
// ("" for an unnamed one). Throws std::invalid_argument on an unterminated group name.
std::pair<std::string, std::vector<std::string>> strip_group_names(const std::string& regex);

}  // namespace faultline::harness
