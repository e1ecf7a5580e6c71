// Unicode sparklines.
#include "report/sparkline.hpp"

#include <algorithm>
#include <cmath>

namespace faultline::report {

std::string sparkline(const std::vector<double>& values, size_t width) {
  static const char* const kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (values.empty() || width == 0) return "";
  const size_t buckets = std::min(width, values.size());
  std::vector<double> means(buckets);
  std::vector<bool> nonfinite(buckets, false);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * values.size() / buckets, end = (b + 1) * values.size() / buckets;
    double sum = 0;
    for (size_t i = begin; i < end; ++i) {
      if (!std::isfinite(values[i])) nonfinite[b] = true;
      sum += values[i];
    }
    means[b] = sum / static_cast<double>(end - begin);
  }
  double low = INFINITY, high = -INFINITY;
  for (size_t b = 0; b < buckets; ++b)
    if (!nonfinite[b]) low = std::min(low, means[b]), high = std::max(high, means[b]);
  std::string line;
  for (size_t b = 0; b < buckets; ++b) {
    if (nonfinite[b]) {
      line += "✕";
      continue;
    }
    const double span = high - low;
    const int level = span > 0 ? static_cast<int>(std::lround((means[b] - low) / span * 7)) : 3;
    line += kBars[std::clamp(level, 0, 7)];
  }
  return line;
}

}  // namespace faultline::report
