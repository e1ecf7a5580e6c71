// Benchmark (run by hand, not a test): flake-aware Bayesian bisection against plain bisect
// with k reruns per probe, on simulated linear histories. Prints a markdown table.
//
// Flake rate f: a commit that contains the regression passes a run with probability f
// (p_bad_looks_good = f); a clean commit fails a run with probability f / 4
// (p_good_looks_bad). With f > 0, one seed in ten has no culprit at all: the failure that
// started the hunt was a flake, and every commit is clean.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bisect/flaky_bisect.hpp"

namespace {

using faultline::bisect::Commit;
using faultline::bisect::FlakyAnswer;
using faultline::bisect::FlakyBisect;
using faultline::bisect::FlakyOptions;
using faultline::bisect::MajorityBisect;
using faultline::bisect::Observation;

constexpr int kSeeds = 1000;

// c0 (good) <- c1 <- ... <- cN (bad), newest first; the candidates are c1..cN.
std::vector<Commit> history(int n) {
  std::vector<Commit> commits;
  for (int i = n; i >= 0; --i)
    commits.push_back({"c" + std::to_string(i), i == 0 ? std::vector<std::string>{}
                                                       : std::vector{"c" + std::to_string(i - 1)}});
  return commits;
}

struct World {
  int culprit;  // 0: none, the initial failure was a flake
  double p_bad_looks_good, p_good_looks_bad;
  std::mt19937_64 rng;

  Observation run(const std::string& commit) {
    const bool contains = culprit > 0 && std::stoi(commit.substr(1)) >= culprit;
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (contains) return u < p_bad_looks_good ? Observation::Good : Observation::Bad;
    return u < p_good_looks_bad ? Observation::Bad : Observation::Good;
  }
};

struct Tally {
  int runs = 0, correct = 0, no_culprit_runs = 0, no_culprit_correct = 0;
  std::vector<int> executions;

  void add(bool no_culprit, bool right, int used) {
    ++runs;
    correct += right;
    no_culprit_runs += no_culprit;
    no_culprit_correct += no_culprit && right;
    executions.push_back(used);
  }
  double mean() const {
    double sum = 0;
    for (int e : executions) sum += e;
    return sum / executions.size();
  }
  int p95() {
    std::sort(executions.begin(), executions.end());
    return executions[static_cast<std::size_t>(0.95 * (executions.size() - 1))];
  }
};

template <class Search>
void drive(Search& search, World& world) {
  while (!search.done()) {
    const std::vector<std::string> proposal = search.next(1);
    if (proposal.empty()) break;
    search.observe(proposal.front(), world.run(proposal.front()));
  }
}

void print_row(int n, double flake, const char* method, Tally& t) {
  const int with_culprit = t.runs - t.no_culprit_runs;
  const int culprit_correct = t.correct - t.no_culprit_correct;
  char none[32] = "-";
  if (t.no_culprit_runs > 0)
    std::snprintf(none, sizeof none, "%.3f", double(t.no_culprit_correct) / t.no_culprit_runs);
  std::printf("| %5d | %.1f | %-15s | %.3f | %.3f | %5s | %6.2f | %3d |\n", n, flake, method,
              double(t.correct) / t.runs, double(culprit_correct) / with_culprit, none, t.mean(),
              t.p95());
}

}  // namespace

int main() {
  const auto start = std::chrono::steady_clock::now();
  std::printf(
      "| N | flake | method | accuracy | acc. (culprit) | \"none\" right | mean exec | p95 |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const int n : {100, 1000}) {
    const std::vector<Commit> commits = history(n);
    const std::string bad = "c" + std::to_string(n);
    for (const double flake : {0.0, 0.1, 0.3}) {
      const FlakyOptions options{flake, flake / 4, 0.1, 0.99, 200};
      Tally bayes;
      std::vector<Tally> majority(3);
      const int reruns[] = {1, 3, 5};
      for (int seed = 0; seed < kSeeds; ++seed) {
        std::mt19937_64 pick(static_cast<unsigned long long>(seed) * 7919 + n);
        const bool no_culprit = flake > 0 && seed % 10 == 0;
        const int culprit = no_culprit ? 0 : 1 + static_cast<int>(pick() % n);
        const std::string truth = "c" + std::to_string(culprit);
        World world{culprit, options.p_bad_looks_good, options.p_good_looks_bad,
                    std::mt19937_64(pick())};
        FlakyBisect search(commits, {"c0"}, bad, options);
        drive(search, world);
        const auto result = search.result();
        const bool right = no_culprit
                               ? result.answer == FlakyAnswer::NoCulprit
                               : result.answer == FlakyAnswer::Culprit && result.culprit == truth;
        bayes.add(no_culprit, right, result.executions);
        for (int m = 0; m < 3; ++m) {
          World noisy{culprit, options.p_bad_looks_good, options.p_good_looks_bad,
                      std::mt19937_64(pick())};
          MajorityBisect plain(commits, {"c0"}, bad, reruns[m]);
          drive(plain, noisy);
          // Plain bisection always names a commit, so it is never right without a culprit.
          majority[m].add(no_culprit, !no_culprit && plain.result().culprit == truth,
                          plain.evaluations());
        }
      }
      print_row(n, flake, "bayesian", bayes);
      for (int m = 0; m < 3; ++m) {
        const std::string name = "bisect, k=" + std::to_string(reruns[m]);
        print_row(n, flake, name.c_str(), majority[m]);
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\n%d seeds per row; %.1f s in all\n", kSeeds, seconds);
  return 0;
}
