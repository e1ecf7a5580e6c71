// Formatting and collection of user errors.
#include "common/error.hpp"

namespace faultline {

namespace {
std::string summary(const std::vector<ErrorItem>& items) {
  if (items.empty()) return "error";
  std::string text = items.front().what;
  if (!items.front().where.empty()) text += " (" + items.front().where + ")";
  if (items.size() > 1) text += " and " + std::to_string(items.size() - 1) + " more";
  return text;
}
}  // namespace

UserError::UserError(std::vector<ErrorItem> items)
    : std::runtime_error(summary(items)), items_(std::move(items)) {}

UserError::UserError(std::string what, std::string where, std::string hint)
    : UserError(std::vector<ErrorItem>{{std::move(what), std::move(where), std::move(hint)}}) {}

std::string format_error(const std::string& program, const ErrorItem& item) {
  std::string line = program + ": error: " + item.what;
  if (!item.where.empty()) line += " (" + item.where + ")";
  if (!item.hint.empty()) line += "; " + item.hint;
  return line;
}

void ErrorList::add(std::string what, std::string where, std::string hint) {
  items_.push_back({std::move(what), std::move(where), std::move(hint)});
}

void ErrorList::throw_if_any() const {
  if (!items_.empty()) throw UserError(items_);
}

}  // namespace faultline
