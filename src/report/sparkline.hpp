// A loss curve as one line of text for Markdown: ▁▂▃▄▅▆▇█, one character per bucket of steps.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace faultline::report {

// At most `width` characters (UTF-8): each the mean of its bucket of values, scaled between the
// finite minimum and maximum; a bucket holding a NaN or Inf is "✕". Empty input: "".
std::string sparkline(const std::vector<double>& values, size_t width = 60);

}  // namespace faultline::report
