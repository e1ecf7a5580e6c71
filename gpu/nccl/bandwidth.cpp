// Bandwidth arithmetic and the slow rank/link rule of `faultline check nccl`.
#include "gpu/nccl/bandwidth.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace faultline::gpu {

double algbw_gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

double allreduce_busbw_gbps(double algbw, int ranks) {
  return ranks > 0 ? algbw * 2.0 * (ranks - 1) / ranks : 0;
}

float allreduce_fill(int rank) {
  return static_cast<float>(rank + 1);
}

float allreduce_expected(int ranks) {
  return static_cast<float>(ranks * (ranks + 1) / 2);
}

int64_t first_mismatch(const std::vector<float>& values, float expected) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] != expected) return static_cast<int64_t>(i);
  return -1;
}

namespace {
double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

std::string gbps(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GB/s", value);
  return text;
}

std::string link_text(const LinkBandwidth& link) {
  return std::to_string(link.a) + "-" + std::to_string(link.b) + " " + gbps(link.busbw_gbps);
}
}  // namespace

SlowVerdict judge_links(const std::vector<LinkBandwidth>& links, double fraction) {
  SlowVerdict verdict;
  std::vector<double> values;
  for (const auto& link : links) values.push_back(link.busbw_gbps);
  verdict.median_gbps = median(values);
  const double limit = fraction * verdict.median_gbps;
  std::map<int, std::pair<int, int>> per_rank;  // rank -> (links, slow links)
  for (const auto& link : links)
    for (int rank : {link.a, link.b}) {
      ++per_rank[rank].first;
      if (link.busbw_gbps < limit) ++per_rank[rank].second;
    }
  for (const auto& [rank, counts] : per_rank)
    if (counts.first >= 2 && counts.second == counts.first) verdict.ranks.push_back(rank);
  const auto named = [&](int rank) {
    return std::find(verdict.ranks.begin(), verdict.ranks.end(), rank) != verdict.ranks.end();
  };
  for (const auto& link : links)
    if (link.busbw_gbps < limit && !named(link.a) && !named(link.b)) verdict.links.push_back(link);
  return verdict;
}

std::string describe(const SlowVerdict& verdict, const std::vector<LinkBandwidth>& links) {
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  for (int rank : verdict.ranks) {
    std::string measured;
    for (const auto& link : links)
      if (link.a == rank || link.b == rank)
        measured += (measured.empty() ? "" : ", ") + link_text(link);
    add("rank " + std::to_string(rank) + " (links " + measured + ")");
  }
  for (const auto& link : verdict.links) add("link " + link_text(link));
  if (text.empty())
    return "no rank or link below the others (median " + gbps(verdict.median_gbps) + ")";
  return text + " (median " + gbps(verdict.median_gbps) + ")";
}

}  // namespace faultline::gpu
