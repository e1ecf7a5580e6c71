// Follows a metrics JSONL file while its writer runs: returns the complete lines added since the
// last call and keeps a partial last line until its newline arrives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::harness {

class MetricsTail {
 public:
  explicit MetricsTail(std::string path) : path_(std::move(path)) {}

  // New complete lines (without the newline). A file that does not exist yet yields nothing.
  std::vector<std::string> read_new_lines();
  // What is left after the writer ended: a last line without a newline is still a line.
  std::vector<std::string> read_rest();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
  std::string partial_;
};

}  // namespace faultline::harness
