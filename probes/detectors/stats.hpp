// Small statistics for the detectors: medians, a binomial tail, an online least-squares line,
// number formatting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::detectors {

// The median (mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> values);

double mean(const std::vector<double>& values);

// P(X >= k) for X ~ Binomial(n, p): the sign test's one-sided p-value. 1 for k <= 0.
double binomial_upper_tail(int64_t k, int64_t n, double p);

// Least-squares line of y on x, updated one point at a time (Welford-style co-moments, so the
// byte counts of a large RSS do not lose their low digits as naive sums of squares would).
class LinearFit {
 public:
  void add(double x, double y);
  int64_t count() const { return n_; }
  double slope() const;  // NaN with fewer than 2 distinct x
  double r2() const;     // coefficient of determination; NaN when y is constant
  double first_x() const { return first_x_; }
  double last_x() const { return last_x_; }
  double first_y() const { return first_y_; }
  double last_y() const { return last_y_; }

 private:
  int64_t n_ = 0;
  double mean_x_ = 0, mean_y_ = 0, sxx_ = 0, syy_ = 0, sxy_ = 0;
  double first_x_ = 0, last_x_ = 0, first_y_ = 0, last_y_ = 0;
};

// Four significant digits ("1.234e+05", "0.5", "nan"): enough evidence, short enough to read.
std::string num(double value);
// Bytes as MiB with one decimal.
std::string mib(double bytes);
// "; also ranks 2, 3": the ranks other than `reported` that crossed the same line ("" if none).
std::string also_ranks(const std::vector<int>& ranks, int reported);

}  // namespace faultline::detectors
