// Incremental file reading with plain POSIX reads from the last offset.
#include "harness/launch/metrics_tail.hpp"

#include <fcntl.h>
#include <unistd.h>

namespace faultline::harness {

std::vector<std::string> MetricsTail::read_new_lines() {
  std::vector<std::string> lines;
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return lines;
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(offset_));
    if (got <= 0) break;
    offset_ += static_cast<uint64_t>(got);
    partial_.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  size_t start = 0;
  for (size_t newline; (newline = partial_.find('\n', start)) != std::string::npos;
       start = newline + 1)
    lines.emplace_back(partial_, start, newline - start);
  partial_.erase(0, start);
  return lines;
}

std::vector<std::string> MetricsTail::read_rest() {
  auto lines = read_new_lines();
  if (!partial_.empty()) lines.push_back(std::move(partial_));
  partial_.clear();
  return lines;
}

}  // namespace faultline::harness
