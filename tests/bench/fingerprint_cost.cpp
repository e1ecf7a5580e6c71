// What faultline-train's fingerprint of its flat parameters costs (docs/metrics-protocol.md,
// "fingerprint"): seconds for a first and a later fingerprint of --params float32 values, and
// the peak memory beyond the buffer (ru_maxrss), in this process on one thread.
//
//   build/tests/bench/fingerprint_cost [--params 100000000]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>

#include "bench_args.hpp"
#include "trainer/fingerprint.hpp"

namespace {

double peak_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t params = faultline::bench::int_arg(argc, argv, "--params", 100000000);
  torch::set_num_threads(1);
  torch::manual_seed(1);
  const auto flat = torch::randn({params});
  faultline::trainer::Fingerprinter fingerprinter;
  const double before = peak_mib();
  for (const char* call : {"first", "later"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto print = fingerprinter(flat);
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - t0;
    std::printf("%s call: %.2f s (norm %.6g)\n", call, seconds.count(), print.norm);
  }
  std::printf("fingerprint of %lld float32 values (%.0f MiB): %.0f MiB beyond them\n",
              static_cast<long long>(params), params * 4 / 1048576.0, peak_mib() - before);
}
