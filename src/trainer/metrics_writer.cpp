// Line-buffered JSONL writer. A line is the unit a tailing harness reads, so each one is flushed.
#include "trainer/metrics_writer.hpp"

#include <cmath>

#include "common/error.hpp"

namespace faultline::trainer {

nlohmann::json number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return value;
}

MetricsWriter::MetricsWriter(const std::string& path, int rank, Mode mode)
    : path_(path), rank_(rank), start_(std::chrono::steady_clock::now()) {
  file_ = std::fopen(path.c_str(), mode == Mode::Append ? "a" : "w");
  if (!file_) throw UserError("cannot open metrics file", path, "check FAULTLINE_METRICS or --out");
}

MetricsWriter::~MetricsWriter() {
  if (file_) std::fclose(file_);
}

void MetricsWriter::write(const char* type, nlohmann::json fields) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  nlohmann::json record = {
      {"v", 1}, {"rank", rank_}, {"t", std::round(seconds * 1e6) / 1e6}, {"type", type}};
  record.update(fields);
  std::string line = record.dump();
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace faultline::trainer
