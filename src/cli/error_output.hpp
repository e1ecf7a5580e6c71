// How `faultline` reports what stopped it: `faultline: error: <what> (<where>); <hint>` lines on
// stderr, and with --json also one document {"error": {...}} on stdout, so a script that parses
// the output always gets JSON.
#pragma once

#include <string>

#include "common/error.hpp"

namespace faultline::cli {

enum class ErrorFormat { Text, Json };

// How a command ends without an answer as expected failures do (exit 4): a trainer or cluster
// that failed the search, an interrupt (SIGINT/SIGTERM), a search that gave up.
enum class StopKind { Infra, Interrupted, Aborted };
const char* to_string(StopKind kind);  // "infra", "interrupted", "aborted": the --json kind

// Prints `faultline <command>: <label>[: <what>][; <hint>]` on stderr and, with --json, the
// error document {"error": {"kind": to_string(kind), ...}} on stdout; returns exit code 4.
int report_stop(ErrorFormat format, const std::string& command, StopKind kind,
                const std::string& what, const std::string& hint = "");

class ErrorOutput {
 public:
  explicit ErrorOutput(ErrorFormat format) : format_(format) {}

  // A command-line mistake: CLI11's message, and where to read the command's options.
  int usage(const std::string& what, const std::string& hint) const;
  int user(const UserError& error) const;       // bad input: every item
  int internal(const std::string& what) const;  // a bug in faultline

 private:
  ErrorFormat format_;
};

}  // namespace faultline::cli
