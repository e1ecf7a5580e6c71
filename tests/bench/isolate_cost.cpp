// What `faultline isolate --run` costs against the failing run it isolates, on real trainer runs
// of micro: 2,000 steps, checkpoints every 100. Each case stores the failing run with
// `faultline train`, isolates it, and prints the search's trainer steps, rank-steps and wall time
// as a share of the failing run's. Targets: NaN and poisoned sample <= 10 % of the run's steps,
// never more than one interval + 16 steps. Run by hand: build/tests/bench/isolate_cost.
// What the figures mean: docs/benchmarks.md, "isolate --run from checkpoints".
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "support/cli.hpp"
#include "trainer/sampler.hpp"

using namespace faultline::testing;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
constexpr int64_t kSteps = 2000, kEvery = 100;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A sample micro's sampler (seed 7, 1022 samples, batch 8) draws first after step `after`.
uint64_t sample_first_drawn_after(int64_t after) {
  faultline::trainer::BatchSampler sampler(7, 1022, 8);
  std::vector<bool> seen(1022, false);
  for (int64_t step = 1; step <= after; ++step)
    for (uint64_t sample : sampler.global_batch(step)) seen[sample] = true;
  for (uint64_t sample : sampler.global_batch(after + 10))
    if (!seen[sample]) return sample;
  return 0;
}

bool run_case(const std::string& name, const std::vector<std::string>& sets, int ranks,
              int expected_exit = 1) {
  const std::string dir = make_temp_dir("isolate-cost");
  std::vector<std::string> train = {"train", "-c",
                                    kMicro,  "--json",
                                    "--set", "train.steps=" + std::to_string(kSteps),
                                    "--set", "train.checkpoint_every=" + std::to_string(kEvery),
                                    "--set", "dist.ranks=" + std::to_string(ranks)};
  for (const auto& set : sets) train.insert(train.end(), {"--set", set});
  auto start = std::chrono::steady_clock::now();
  auto run = faultline_cli(train, dir, 1800);
  const double run_wall = seconds_since(start);
  if (run.result.exit_code != expected_exit)
    fmt::print("{:<26} the failing run exited {} (expected {})\n", name, run.result.exit_code,
               expected_exit);
  const int64_t run_id = run.doc.value("run_id", int64_t{0});
  auto shown = faultline_cli({"show", std::to_string(run_id), "--json"}, dir);
  const int64_t run_steps = std::max<int64_t>(1, shown.doc.value("steps_stored", 1) / ranks);

  start = std::chrono::steady_clock::now();
  auto cli = faultline_cli({"isolate", "--run", std::to_string(run_id), "--json"}, dir, 1800);
  const double wall = seconds_since(start);
  if (cli.result.exit_code != 0) {
    fmt::print("{:<26} not localized (exit {}): {}\n", name, cli.result.exit_code,
               cli.result.output.substr(0, 400));
    return false;
  }
  const auto& doc = cli.doc;
  const int64_t steps = doc.at("steps_executed"), rank_steps = doc.at("rank_steps_executed");
  fmt::print(
      "{:<26} run {:>5} steps x {} rank(s) {:6.1f} s | isolate {:>2} trials {:>4} steps "
      "({:5.1f} %), {:>4} rank-steps ({:5.1f} %), {:5.1f} s ({:5.1f} %) | {} at step {} {} "
      "samples {} from step {}\n",
      name, run_steps, ranks, run_wall, doc.at("trials").get<int>(), steps,
      100.0 * steps / run_steps, rank_steps, 100.0 * rank_steps / (run_steps * ranks), wall,
      100.0 * wall / run_wall, doc.at("kind").get<std::string>(), doc.at("step").dump(),
      doc.value("where", nlohmann::json()).dump(), doc.at("samples").dump(),
      doc.at("min_scale").at("from_step").dump());
  if (expected_exit == 0) {  // a rank search: the whole run once at 1 rank, then windows
    fmt::print("{:<26} 1-rank replay of the run: {:.1f} % of its rank-steps at best\n", "",
               100.0 / ranks);
    return true;
  }
  const bool within = steps <= kEvery + 16;
  fmt::print("{:<26} within one interval + 16 steps: {}\n", "", within ? "yes" : "NO");
  return within;
}

}  // namespace

int main() {
  bool ok = run_case("nan blocks.1.mlp @1234",
                     {"fault.nan_step=1234", "fault.nan_layer=blocks.1.mlp"}, 1);
  // Every sample is drawn in the first epoch (~128 steps): one first drawn after checkpoint 100.
  const uint64_t poison = sample_first_drawn_after(kEvery);
  ok = run_case("poisoned sample " + std::to_string(poison),
                {"fault.poison_sample=" + std::to_string(poison)}, 1) &&
       ok;
  ok = run_case("nan on 4 ranks @1234", {"fault.nan_step=1234", "fault.nan_layer=blocks.0.attn"},
                4) &&
       ok;
  // Silent: no detector fails the run (exit 0), so `isolate --run` checks its ranks. A one-off
  // corruption needs the whole run replayed at one rank: 1/4 of its rank-steps, plus windows.
  run_case("corrupt grads rank 2 @1234",
           {"fault.corrupt_grad_rank=2", "fault.corrupt_grad_step=1234"}, 4, 0);
  return ok ? 0 : 1;
}
