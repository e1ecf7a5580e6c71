// User-facing errors: what went wrong, where, and a hint. Caught once in each main() and printed
// as `faultline: error: <what> (<where>); <hint>`.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace faultline {

struct ErrorItem {
  std::string what;
  std::string where;  // file, file:line, key or value; may be empty
  std::string hint;   // what would be valid; may be empty
};

// One or more user errors (bad config, bad data, bad checkpoint). Every error of one kind is
// collected before throwing so a user fixes all of them in one go.
class UserError : public std::runtime_error {
 public:
  explicit UserError(std::vector<ErrorItem> items);
  UserError(std::string what, std::string where, std::string hint = "");
  const std::vector<ErrorItem>& items() const { return items_; }

 private:
  std::vector<ErrorItem> items_;
};

// Formats one item as `<program>: error: <what> (<where>); <hint>`.
std::string format_error(const std::string& program, const ErrorItem& item);

// Collects errors, then throws them together.
class ErrorList {
 public:
  void add(std::string what, std::string where, std::string hint = "");
  bool empty() const { return items_.empty(); }
  void throw_if_any() const;
  const std::vector<ErrorItem>& items() const { return items_; }

 private:
  std::vector<ErrorItem> items_;
};

}  // namespace faultline
