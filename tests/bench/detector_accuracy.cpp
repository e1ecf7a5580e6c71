// Benchmark (run by hand, not a test): how often the loss detectors flag healthy runs, and which
// degraded configurations they catch, at which rung. Runs the real faultline-train (1 rank) on
// tiny and micro; judges each run's records with the product's detectors (default.toml, timing
// detectors off: on a shared machine their verdicts are about the machine). Prints markdown.
//
//   detector_accuracy [--seeds N] [--degraded-seeds M] [--reference-runs K] [--threads T]
//                     [--models tiny,micro]
//
// False positives: each healthy seed judged alone, and against a reference of K other seeds
// (the next K, cyclically) and of one other seed. Detection: each degraded configuration's seeds
// against a reference of the first K healthy seeds; "10" is the first 10 steps of the run (the
// 10-step rung's prefix), "100" the 100-step rung (micro's whole run is 40 steps). A config
// "should" be caught when its smoothed loss at the last step is >10 % above the healthy band's top
// (all N healthy seeds).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "probes/detectors/reference.hpp"
#include "probes/detectors/run_judge.hpp"
#include "support/metrics.hpp"

namespace {

using namespace faultline;
using Records = std::vector<MetricsRecord>;

struct Model {
  std::string name, recipe;
  int64_t vocab = 0, warmup = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> degraded;
};

struct Run {
  Records records;
  std::vector<StepRecord> steps;
  bool ok = false;
};

struct Options {
  int seeds = 20, degraded_seeds = 2, reference_runs = 3;
  int threads = 1;  // train.threads: results differ in their last bits between thread counts
};

Run train(const Model& model, std::vector<std::string> overrides, const Options& bench) {
  testing::TrainOptions options;
  options.recipe = model.recipe;
  options.overrides = std::move(overrides);
  options.overrides.push_back("train.threads=" + std::to_string(bench.threads));
  options.timeout_s = 600;
  auto trained = testing::run_trainer(options);
  Run run;
  run.ok = trained.rank0().exit_code == 0 && !trained.rank0().timed_out;
  for (const auto& line : trained.metrics.at(0)) {
    auto parsed = parse_metrics_line(line.dump());
    if (parsed.status != ParseStatus::Ok) continue;
    run.records.push_back(*parsed.record);
    if (auto* step = std::get_if<StepRecord>(&*parsed.record)) run.steps.push_back(*step);
  }
  const std::string rm = "rm -rf '" + trained.out_dir + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", rm.c_str());
  return run;
}

detectors::Thresholds thresholds() {
  return detectors::load_thresholds(
      FAULTLINE_SOURCE_DIR "/recipes/detectors/default.toml",
      {"straggler.enabled=false", "data_stall.enabled=false", "slow.enabled=false"});
}

// Failing kinds (warnings marked) of the run's records up to `last_step`, alone and (when the
// reference is not empty) against it.
std::set<std::string> judge(const Model& model, const Run& run, int64_t last_step,
                            const std::vector<std::vector<StepRecord>>& reference) {
  const auto t = thresholds();
  detectors::RunJudge judge(t, detectors::RunContext{1, model.warmup, model.vocab});
  std::vector<StepRecord> prefix;
  for (const auto& record : run.records) {
    if (auto* step = std::get_if<StepRecord>(&record)) {
      if (step->step > last_step) continue;
      prefix.push_back(*step);
    }
    judge.observe(record);
  }
  auto failures = judge.finish();
  if (!reference.empty())
    if (auto regression = detectors::compare_to_reference(prefix, reference, t.loss_regression))
      failures.push_back(*regression);
  std::set<std::string> kinds;
  for (const auto& f : failures)
    kinds.insert(
        std::string(detectors::severity(f.kind) == detectors::Severity::Warning ? "warning " : "") +
        to_string(f.kind));
  return kinds;
}

// The trailing mean of the last 10 steps' losses.
double final_loss(const std::vector<StepRecord>& steps) {
  double sum = 0;
  int count = 0;
  for (auto it = steps.rbegin(); it != steps.rend() && count < 10; ++it)
    if (std::isfinite(it->loss)) sum += it->loss, ++count;
  return count ? sum / count : NAN;
}

std::string kinds_text(const std::map<std::string, int>& counts) {
  std::string out;
  for (const auto& [kind, count] : counts)
    out += (out.empty() ? "" : ", ") + kind + " " + std::to_string(count);
  return out.empty() ? "-" : out;
}

void measure(const Model& model, const Options& options) {
  const int seeds = options.seeds, degraded_seeds = options.degraded_seeds;
  const int k = options.reference_runs;
  std::printf("\n### %s (%s)\n\n", model.name.c_str(), model.recipe.c_str());
  std::vector<Run> healthy;
  for (int i = 0; i < seeds; ++i) {
    healthy.push_back(train(model, {"train.seed=" + std::to_string(1000 + i)}, options));
    std::fprintf(stderr, "%s healthy seed %d: %zu steps\n", model.name.c_str(), 1000 + i,
                 healthy.back().steps.size());
  }
  const int64_t last = healthy.at(0).steps.empty() ? 0 : healthy[0].steps.back().step;
  double band_top = 0;
  for (const auto& run : healthy) band_top = std::max(band_top, final_loss(run.steps));

  std::map<std::string, int> alone, against_k, against_one;
  int flagged_alone = 0, flagged_k = 0, flagged_one = 0;
  for (int i = 0; i < seeds; ++i) {
    std::vector<std::vector<StepRecord>> reference_k, reference_one;
    for (int j = 1; j <= k; ++j) reference_k.push_back(healthy[(i + j) % seeds].steps);
    reference_one.push_back(healthy[(i + 1) % seeds].steps);
    auto a = judge(model, healthy[i], last, {});
    auto b = judge(model, healthy[i], last, reference_k);
    auto c = judge(model, healthy[i], last, reference_one);
    for (const auto& kind : a) ++alone[kind];
    for (const auto& kind : b)
      if (!a.count(kind)) ++against_k[kind];
    for (const auto& kind : c)
      if (!a.count(kind)) ++against_one[kind];
    flagged_alone += !a.empty();
    flagged_k += b.size() > a.size();
    flagged_one += c.size() > a.size();
  }
  std::printf(
      "False positives, %d healthy seeds (%lld steps, %d thread(s)):\n\n"
      "| judged | runs flagged | by kind |\n|---|---|---|\n"
      "| alone (stalled, loss_spike, bad_init, ...) | %d of %d | %s |\n"
      "| against %d other seeds (loss_regression) | %d of %d | %s |\n"
      "| against 1 other seed (loss_regression) | %d of %d | %s |\n\n",
      seeds, static_cast<long long>(last), options.threads, flagged_alone, seeds,
      kinds_text(alone).c_str(), k, flagged_k, seeds, kinds_text(against_k).c_str(), flagged_one,
      seeds, kinds_text(against_one).c_str());

  std::vector<std::vector<StepRecord>> reference;
  for (int j = 0; j < k && j < seeds; ++j) reference.push_back(healthy[j].steps);
  std::printf(
      "Degraded, %d seed(s) each, against %d healthy seeds; healthy band top at step %lld: %.3f\n\n"
      "| config | loss at %lld | vs band | >10 %% worse | caught at 10 | caught at %lld | kinds |\n"
      "|---|---|---|---|---|---|---|\n",
      degraded_seeds, k, static_cast<long long>(last), band_top, static_cast<long long>(last),
      static_cast<long long>(last));
  for (const auto& [name, overrides] : model.degraded) {
    int at10 = 0, at_last = 0, worse = 0;
    double loss_sum = 0;
    std::map<std::string, int> kinds;
    for (int s = 0; s < degraded_seeds; ++s) {
      auto o = overrides;
      o.push_back("train.seed=" + std::to_string(2000 + s));
      const auto run = train(model, o, options);
      const double loss = final_loss(run.steps);
      loss_sum += loss;
      worse += !(loss <= 1.1 * band_top);  // NaN counts as worse
      at10 += !judge(model, run, 10, reference).empty();
      const auto found = judge(model, run, last, reference);
      at_last += !found.empty();
      for (const auto& kind : found) ++kinds[kind];
      std::fprintf(stderr, "%s %s seed %d: loss %.3f, %zu kinds\n", model.name.c_str(),
                   name.c_str(), 2000 + s, loss, found.size());
    }
    const double mean = loss_sum / degraded_seeds;
    std::printf("| %s | %.3f | %+.1f %% | %d/%d | %d/%d | %d/%d | %s |\n", name.c_str(), mean,
                100 * (mean - band_top) / band_top, worse, degraded_seeds, at10, degraded_seeds,
                at_last, degraded_seeds, kinds_text(kinds).c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  options.seeds = faultline::bench::int_arg(argc, argv, "--seeds", options.seeds);
  options.degraded_seeds =
      faultline::bench::int_arg(argc, argv, "--degraded-seeds", options.degraded_seeds);
  options.reference_runs =
      faultline::bench::int_arg(argc, argv, "--reference-runs", options.reference_runs);
  options.threads = faultline::bench::int_arg(argc, argv, "--threads", options.threads);
  const std::string only = faultline::bench::text_arg(argc, argv, "--models", "");
  const std::vector<Model> models = {
      {"micro",
       FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml",
       64,
       5,
       {{"lr too low (1e-4)", {"optim.lr=1e-4"}},
        {"lr too high (1e-1)", {"optim.lr=1e-1"}},
        {"lr far too high (0.5), no warm-up", {"optim.lr=0.5", "schedule.warmup_steps=0"}},
        {"batch too small (2)", {"train.batch_size=2"}},
        {"warm-up removed", {"schedule.warmup_steps=0"}},
        {"weight decay too high (3.0)", {"optim.weight_decay=3.0"}},
        {"grad clip too tight (0.01)", {"optim.grad_clip=0.01"}}}},
      {"tiny",
       FAULTLINE_SOURCE_DIR "/recipes/train/tiny.toml",
       256,
       10,
       {{"lr too low (3e-5)", {"optim.lr=3e-5"}},
        {"lr low (3e-4)", {"optim.lr=3e-4"}},
        {"lr too high (3e-2)", {"optim.lr=3e-2"}},
        {"lr far too high (0.1), no warm-up", {"optim.lr=0.1", "schedule.warmup_steps=0"}},
        {"batch too small (2)", {"train.batch_size=2"}},
        {"batch small (8)", {"train.batch_size=8"}},
        {"warm-up removed", {"schedule.warmup_steps=0"}},
        {"weight decay too high (3.0)", {"optim.weight_decay=3.0"}},
        {"grad clip too tight (0.01)", {"optim.grad_clip=0.01"}}}},
  };
  for (const auto& model : models)
    if (only.empty() || only.find(model.name) != std::string::npos) measure(model, options);
  return 0;
}
