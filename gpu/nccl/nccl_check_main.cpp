// faultline-nccl-check: allreduce correctness and bus bandwidth across the GPUs of this node with
// NCCL directly (one process, one communicator per device set). `faultline check nccl` runs it;
// faultline itself links no CUDA. Exit codes: NcclCheckExit (gpu/nccl/bandwidth.hpp).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/nccl/bandwidth.hpp"

namespace {

using faultline::gpu::NcclCheckExit;

struct Options {
  int ranks = 0;  // 0: every visible device
  uint64_t bytes = 64ull << 20;
  int iters = 20, warmup = 5;
};

[[noreturn]] void fail(NcclCheckExit code, const std::string& message) {
  std::fprintf(stderr, "faultline-nccl-check: %s\n", message.c_str());
  std::exit(static_cast<int>(code));
}

void check(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    fail(NcclCheckExit::Infrastructure, std::string(what) + ": " + cudaGetErrorString(result));
}

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    fail(NcclCheckExit::Infrastructure, std::string(what) + ": " + ncclGetErrorString(result));
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    auto value = [&] { return std::strtoll(argv[++i], nullptr, 10); };
    if (arg == "--ranks" && has_value)
      options.ranks = static_cast<int>(value());
    else if (arg == "--bytes" && has_value)
      options.bytes = static_cast<uint64_t>(value());
    else if (arg == "--iters" && has_value)
      options.iters = static_cast<int>(value());
    else if (arg == "--warmup" && has_value)
      options.warmup = static_cast<int>(value());
    else
      fail(NcclCheckExit::Usage,
           "usage: faultline-nccl-check [--ranks N] [--bytes B] [--iters I] [--warmup W]");
  }
  if (options.ranks < 0 || options.bytes < 4 || options.iters < 1 || options.warmup < 0)
    fail(NcclCheckExit::Usage, "--ranks must be >= 0, --bytes >= 4, --iters >= 1, --warmup >= 0");
  return options;
}

// One allreduce set-up over `devices`: rank i is devices[i].
class Ring {
 public:
  Ring(const std::vector<int>& devices, size_t count) : devices_(devices), count_(count) {
    comms_.resize(devices.size());
    check(ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data()),
          "ncclCommInitAll");
    for (size_t r = 0; r < devices.size(); ++r) {
      check(cudaSetDevice(devices[r]), "cudaSetDevice");
      Buffers b;
      check(cudaStreamCreate(&b.stream), "cudaStreamCreate");
      check(cudaMalloc(&b.send, count * sizeof(float)), "cudaMalloc");
      check(cudaMalloc(&b.recv, count * sizeof(float)), "cudaMalloc");
      check(cudaEventCreate(&b.begin), "cudaEventCreate");
      check(cudaEventCreate(&b.end), "cudaEventCreate");
      const std::vector<float> fill(count, faultline::gpu::allreduce_fill(static_cast<int>(r)));
      check(cudaMemcpy(b.send, fill.data(), count * sizeof(float), cudaMemcpyHostToDevice),
            "cudaMemcpy");
      buffers_.push_back(b);
    }
  }
  ~Ring() {
    for (size_t r = 0; r < devices_.size(); ++r) {
      cudaSetDevice(devices_[r]);
      cudaFree(buffers_[r].send);
      cudaFree(buffers_[r].recv);
      cudaEventDestroy(buffers_[r].begin);
      cudaEventDestroy(buffers_[r].end);
      cudaStreamDestroy(buffers_[r].stream);
      ncclCommDestroy(comms_[r]);
    }
  }

  void allreduce(int times) {
    for (int i = 0; i < times; ++i) {
      check(ncclGroupStart(), "ncclGroupStart");
      for (size_t r = 0; r < devices_.size(); ++r)
        check(ncclAllReduce(buffers_[r].send, buffers_[r].recv, count_, ncclFloat, ncclSum,
                            comms_[r], buffers_[r].stream),
              "ncclAllReduce");
      check(ncclGroupEnd(), "ncclGroupEnd");
    }
  }
  void synchronize() {
    for (size_t r = 0; r < devices_.size(); ++r) {
      check(cudaSetDevice(devices_[r]), "cudaSetDevice");
      check(cudaStreamSynchronize(buffers_[r].stream), "cudaStreamSynchronize");
    }
  }
  // The first rank whose result is wrong, and where; -1 when all are right.
  std::pair<int, int64_t> verify() {
    const float expected = faultline::gpu::allreduce_expected(static_cast<int>(devices_.size()));
    std::vector<float> host(count_);
    for (size_t r = 0; r < devices_.size(); ++r) {
      check(cudaSetDevice(devices_[r]), "cudaSetDevice");
      check(
          cudaMemcpy(host.data(), buffers_[r].recv, count_ * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
      if (int64_t at = faultline::gpu::first_mismatch(host, expected); at >= 0)
        return {static_cast<int>(r), at};
    }
    return {-1, -1};
  }
  // Seconds per allreduce, from rank 0's stream (every rank leaves a ring allreduce together).
  double seconds_per_allreduce(int iters) {
    for (size_t r = 0; r < devices_.size(); ++r)
      check(cudaEventRecord(buffers_[r].begin, buffers_[r].stream), "cudaEventRecord");
    allreduce(iters);
    for (size_t r = 0; r < devices_.size(); ++r)
      check(cudaEventRecord(buffers_[r].end, buffers_[r].stream), "cudaEventRecord");
    synchronize();
    float slowest_ms = 0;
    for (size_t r = 0; r < devices_.size(); ++r) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, buffers_[r].begin, buffers_[r].end), "cudaEventElapsedTime");
      slowest_ms = std::max(slowest_ms, ms);
    }
    return slowest_ms / 1e3 / iters;
  }

 private:
  struct Buffers {
    float *send = nullptr, *recv = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t begin = nullptr, end = nullptr;
  };
  std::vector<int> devices_;
  size_t count_;
  std::vector<ncclComm_t> comms_;
  std::vector<Buffers> buffers_;
};

// Correctness, then the bus bandwidth of `iters` allreduces over `devices`.
double measure(const std::vector<int>& devices, const Options& options, const char* label) {
  const size_t count = options.bytes / sizeof(float);
  Ring ring(devices, count);
  ring.allreduce(1);
  ring.synchronize();
  if (auto [rank, at] = ring.verify(); rank >= 0)
    fail(NcclCheckExit::Failed, std::string(label) + ": allreduce result wrong on rank " +
                                    std::to_string(rank) + " at element " + std::to_string(at));
  ring.allreduce(options.warmup);
  const double seconds = ring.seconds_per_allreduce(options.iters);
  const double algbw = faultline::gpu::algbw_gbps(count * sizeof(float), seconds);
  const double busbw =
      faultline::gpu::allreduce_busbw_gbps(algbw, static_cast<int>(devices.size()));
  std::printf(
      "%s: correct; %.3f ms per allreduce of %llu bytes, algbw %.2f GB/s, busbw %.2f GB/s\n", label,
      seconds * 1e3, static_cast<unsigned long long>(count * sizeof(float)), algbw, busbw);
  return busbw;
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  int visible = 0;
  if (cudaGetDeviceCount(&visible) != cudaSuccess || visible == 0)
    fail(NcclCheckExit::Infrastructure,
         "no CUDA device here; the NCCL check needs at least one GPU");
  if (options.ranks == 0) options.ranks = visible;
  if (options.ranks > visible)
    fail(NcclCheckExit::Infrastructure, "--ranks " + std::to_string(options.ranks) + " but only " +
                                            std::to_string(visible) + " CUDA device(s) visible");
  std::vector<int> all;
  for (int r = 0; r < options.ranks; ++r) all.push_back(r);
  std::printf("faultline-nccl-check: %d rank(s), one per GPU, NCCL %d.%d.%d\n", options.ranks,
              NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  measure(all, options, "all ranks");
  if (options.ranks == 1) {
    std::printf("one GPU: correctness checked; bandwidth needs 2 or more ranks (busbw is 0)\n");
    return static_cast<int>(NcclCheckExit::Pass);
  }
  // Each link of the ring on its own, so a slow GPU or link stands out from the others.
  std::vector<faultline::gpu::LinkBandwidth> links;
  const int pairs = options.ranks == 2 ? 1 : options.ranks;
  for (int a = 0; a < pairs; ++a) {
    const int b = (a + 1) % options.ranks;
    const std::string label = "link " + std::to_string(a) + "-" + std::to_string(b);
    links.push_back({a, b, measure({a, b}, options, label.c_str())});
  }
  const auto verdict = faultline::gpu::judge_links(links);
  const bool slow = !verdict.ranks.empty() || !verdict.links.empty();
  std::printf("%s: %s\n", slow ? "slow" : "pass", faultline::gpu::describe(verdict, links).c_str());
  return static_cast<int>(slow ? NcclCheckExit::Failed : NcclCheckExit::Pass);
}
