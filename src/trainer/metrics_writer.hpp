// Writes the metrics protocol (docs/metrics-protocol.md): one JSON object per line, flushed per
// line, every record with "v":1, "rank", "t" and "type".
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace faultline::trainer {

class MetricsWriter {
 public:
  enum class Mode { Truncate, Append };
  MetricsWriter(const std::string& path, int rank, Mode mode);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // Adds v, rank, t and type to `fields`, writes the line and flushes it.
  void write(const char* type, nlohmann::json fields);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int rank_;
  std::FILE* file_;
  std::chrono::steady_clock::time_point start_;
};

// JSON has no NaN or Inf: such values are written as the strings "nan", "inf" and "-inf".
nlohmann::json number(double value);

}  // namespace faultline::trainer
