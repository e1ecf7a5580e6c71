// Prints errors as text or as one JSON document, and picks their exit codes.
#include "cli/error_output.hpp"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/run_commands.hpp"
#include "common/enum_names.hpp"

namespace faultline {
// The JSON form of one error item, as a --json error document lists it.
void to_json(nlohmann::json& out, const ErrorItem& item) {
  out = {{"what", item.what}, {"where", item.where}, {"hint", item.hint}};
}
}  // namespace faultline

namespace faultline::cli {

namespace {
int print_json(const std::string& kind, const std::vector<ErrorItem>& items, ExitCode code) {
  fmt::print(
      "{}\n",
      nlohmann::json{
          {"error", {{"kind", kind}, {"exit_code", static_cast<int>(code)}, {"items", items}}}}
          .dump());
  return static_cast<int>(code);
}

constexpr std::pair<StopKind, const char*> kStopKindNames[] = {
    {StopKind::Infra, "infra"},
    {StopKind::Interrupted, "interrupted"},
    {StopKind::Aborted, "aborted"}};

// The words the text line starts with, after the command.
const char* label_of(StopKind kind) {
  switch (kind) {
    case StopKind::Infra:
      return "infrastructure error";
    case StopKind::Interrupted:
      return "interrupted";
    case StopKind::Aborted:
      return "aborted";
  }
  return "?";
}

}  // namespace

const char* to_string(StopKind kind) {
  return name_of(kStopKindNames, kind);
}

int report_stop(ErrorFormat format, const std::string& command, StopKind kind,
                const std::string& what, const std::string& hint) {
  fmt::print(stderr, "faultline {}: {}{}{}\n", command, label_of(kind),
             what.empty() ? "" : ": " + what, hint.empty() ? "" : "; " + hint);
  if (format == ErrorFormat::Json)
    return print_json(to_string(kind),
                      {{what.empty() ? label_of(kind) : what, "faultline " + command, hint}},
                      ExitCode::Infra);
  return static_cast<int>(ExitCode::Infra);
}

// The text lines go to stderr in both formats: a person watching a --json run still reads them,
// and stdout keeps exactly one document.
int ErrorOutput::usage(const std::string& what, const std::string& hint) const {
  const ErrorItem item{what, "command line", hint};
  fmt::print(stderr, "{}\n", format_error("faultline", item));
  if (format_ == ErrorFormat::Json) return print_json("usage", {item}, ExitCode::BadInput);
  return static_cast<int>(ExitCode::BadInput);
}

int ErrorOutput::user(const UserError& error) const {
  for (const auto& item : error.items())
    fmt::print(stderr, "{}\n", format_error("faultline", item));
  if (format_ == ErrorFormat::Json) return print_json("input", error.items(), ExitCode::BadInput);
  return static_cast<int>(ExitCode::BadInput);
}

int ErrorOutput::internal(const std::string& what) const {
  fmt::print(stderr, "faultline: internal error: {}\n", what);
  if (format_ == ErrorFormat::Json)
    return print_json("internal", {{what, "", "a bug in faultline: please report it"}},
                      ExitCode::Internal);
  return static_cast<int>(ExitCode::Internal);
}

}  // namespace faultline::cli
