// The arithmetic of `faultline check nccl`: bus bandwidth as nccl-tests define it, the expected
// allreduce result, and the rule that names a slow rank or link. Pure C++ (no CUDA), unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::gpu {

// nccl-tests' algorithm bandwidth: bytes / time, in GB/s (1e9 bytes).
double algbw_gbps(uint64_t bytes, double seconds);
// nccl-tests' bus bandwidth of an allreduce over `ranks`: algbw × 2(n−1)/n (0 for one rank:
// nothing crosses a link).
double allreduce_busbw_gbps(double algbw, int ranks);

// Rank r sends r+1 in every element, so each element of the sum is n(n+1)/2: exact in float32
// for any rank count a node has.
float allreduce_fill(int rank);
float allreduce_expected(int ranks);
// The first index whose value differs from `expected`, or -1.
int64_t first_mismatch(const std::vector<float>& values, float expected);

// The bus bandwidth of the allreduce between two ranks (a link of the ring 0-1, 1-2, ..., n-1-0).
struct LinkBandwidth {
  int a = 0, b = 0;
  double busbw_gbps = 0;
};

struct SlowVerdict {
  double median_gbps = 0;
  std::vector<int> ranks;            // ranks all of whose measured links are slow
  std::vector<LinkBandwidth> links;  // slow links not explained by a slow rank
};

// A link is slow below `fraction` × the median of all links. A rank whose every link (two or more)
// is slow is named; a slow link between two ranks that are not is named as a link.
SlowVerdict judge_links(const std::vector<LinkBandwidth>& links, double fraction = 0.7);

// One line for a person, e.g. "rank 2 (links 1-2 3.1 GB/s, 2-3 3.0 GB/s; median 40.2 GB/s)".
std::string describe(const SlowVerdict& verdict, const std::vector<LinkBandwidth>& links);

// Exit codes of faultline-nccl-check (and so of `faultline check nccl`), as faultline's own
// result commands use them (docs/cli.md, docs/gpu.md).
enum class NcclCheckExit : int {
  Pass = 0,            // every allreduce was right and, with 2+ ranks, no rank or link was slow
  Failed = 1,          // an allreduce result was wrong, or a rank or link is well below the others
  Usage = 2,           // bad command line
  Infrastructure = 4,  // no CUDA device, fewer than --ranks, or CUDA/NCCL failed
};

}  // namespace faultline::gpu
