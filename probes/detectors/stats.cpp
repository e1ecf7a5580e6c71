// Medians, the binomial tail, the online least-squares fit and number formatting shared by the
// detectors.
#include "probes/detectors/stats.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace faultline::detectors {

double median(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double binomial_upper_tail(int64_t k, int64_t n, double p) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  // Summed in log space: C(n, i) overflows doubles long before a long run's step count does.
  const double log_p = std::log(p), log_q = std::log1p(-p);
  const auto nd = static_cast<double>(n);
  double tail = 0;
  for (int64_t i = k; i <= n; ++i) {
    const auto id = static_cast<double>(i);
    tail += std::exp(std::lgamma(nd + 1) - std::lgamma(id + 1) - std::lgamma(nd - id + 1) +
                     id * log_p + (nd - id) * log_q);
  }
  return std::min(1.0, tail);
}

void LinearFit::add(double x, double y) {
  if (n_ == 0) {
    first_x_ = x;
    first_y_ = y;
  }
  last_x_ = x;
  last_y_ = y;
  ++n_;
  const double dx = x - mean_x_;
  mean_x_ += dx / static_cast<double>(n_);
  const double dy = y - mean_y_;
  mean_y_ += dy / static_cast<double>(n_);
  sxx_ += dx * (x - mean_x_);
  syy_ += dy * (y - mean_y_);
  sxy_ += dx * (y - mean_y_);
}

double LinearFit::slope() const {
  if (n_ < 2 || sxx_ <= 0) return std::numeric_limits<double>::quiet_NaN();
  return sxy_ / sxx_;
}

double LinearFit::r2() const {
  if (n_ < 2 || sxx_ <= 0 || syy_ <= 0) return std::numeric_limits<double>::quiet_NaN();
  return (sxy_ * sxy_) / (sxx_ * syy_);
}

std::string num(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", value);
}

std::string mib(double bytes) {
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

std::string also_ranks(const std::vector<int>& ranks, int reported) {
  std::vector<int> others;
  for (int rank : ranks)
    if (rank != reported) others.push_back(rank);
  if (others.empty()) return "";
  return fmt::format("; also rank{} {}", others.size() > 1 ? "s" : "", fmt::join(others, ", "));
}

}  // namespace faultline::detectors
