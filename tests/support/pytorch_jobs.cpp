// Test support for the e2e tests of examples/pytorch/train.py (pytorch_jobs.hpp).
#include "support/pytorch_jobs.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "support/recipe_text.hpp"
#include "trainer/sampler.hpp"

namespace faultline::testing {

using ::testing::HasSubstr;

std::vector<std::string> kinds_of(const nlohmann::json& failures) {
  std::vector<std::string> kinds;
  for (const auto& failure : failures) kinds.push_back(failure.at("kind"));
  return kinds;
}

std::vector<std::string> failing_kinds_of(const nlohmann::json& failures) {
  std::vector<std::string> kinds;
  for (const auto& failure : failures)
    if (failure.value("severity", "") != "warning") kinds.push_back(failure.at("kind"));
  return kinds;
}

std::pair<uint64_t, int64_t> sample_first_drawn_in(int64_t from, int64_t to) {
  faultline::trainer::BatchSampler sampler(1234, 1023, 8);
  std::map<uint64_t, int64_t> first;
  for (int64_t step = 1; step <= to; ++step)
    for (uint64_t sample : sampler.global_batch(step)) first.emplace(sample, step);
  for (const auto& [sample, step] : first)
    if (step > from) return {sample, step};
  ADD_FAILURE() << "no sample first drawn in (" << from << ", " << to << "]";
  return {0, 0};
}

ProcessResult run_helper_job(const std::string& job, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/python3", kExamples + "/train.py", "--log-every", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process({argv,
                      {{"FAULTLINE_METRICS", job + "/metrics.rank0.jsonl"},
                       {"FAULTLINE_OUT", job},
                       {"FAULTLINE_CHECKPOINT_EVERY", "50"},
                       {"PYTHONPATH", FAULTLINE_SOURCE_DIR "/probes/python"}},
                      300});
}

ProcessSpec job_rank(const std::string& job, int rank, int world, const std::string& port,
                     const std::vector<std::string>& args) {
  ProcessSpec spec{{"/usr/bin/python3", kExamples + "/train.py", "--log-every", "0"},
                   {{"FAULTLINE_METRICS", job + "/metrics.rank{rank}.jsonl"},
                    {"FAULTLINE_STACKS", job + "/stacks.rank{rank}.txt"},
                    {"FAULTLINE_OUT", job},
                    {"FAULTLINE_CHECKPOINT_EVERY", "50"},
                    {"PYTHONPATH", FAULTLINE_SOURCE_DIR "/probes/python"},
                    {"RANK", std::to_string(rank)},
                    {"WORLD_SIZE", std::to_string(world)},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", port}},
                   300};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  return spec;
}

ProcessSpec job_rank_stopped_by_time_limit(const std::string& job, int rank, int world,
                                           const std::string& port,
                                           const std::vector<std::string>& args,
                                           const std::string& watched, const std::string& text,
                                           const std::string& where, double stalled_s) {
  ProcessSpec spec = job_rank(job, rank, world, port, args);
  const std::string stacks = job + "/stacks.rank" + std::to_string(rank) + ".txt";
  auto contains = [](const std::string& path, const std::string& part) {
    return read_text(path).find(part) != std::string::npos;
  };
  using Clock = std::chrono::steady_clock;
  spec.signal_when = [=, polls = 0, seen = Clock::time_point()]() mutable {
    if (polls < 0) return 0;
    if (polls == 0 && !contains(watched, text)) return 0;
    if (polls == 0) seen = Clock::now();
    if (contains(stacks, where) &&
        Clock::now() - seen >= std::chrono::duration<double>(stalled_s)) {
      polls = -1;
      return SIGTERM;
    }
    return polls++ % 50 == 0 ? SIGUSR1 : 0;
  };
  return spec;
}

Cli import_helper_job(const std::string& dir, const std::string& job,
                      const std::vector<std::string>& sets) {
  return faultline_cli(with_sets({"import", job, "-c", kHelper, "--json"}, sets), dir);
}

Cli isolate_imported(const std::string& dir, const Cli& imported,
                     const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"isolate", "--run",
                                   std::to_string(imported.doc.at("run_id").get<int64_t>())};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--json");
  return faultline_cli(argv, dir, 300);
}

nlohmann::json expect_isolated_from_checkpoint_100(const std::string& dir, const std::string& run,
                                                   int64_t extra_steps) {
  auto cli = faultline_cli({"isolate", "--run", run, "--json"}, dir, 300);
  EXPECT_EQ(cli.result.exit_code, 0) << cli.result.output;
  if (cli.result.exit_code != 0) return cli.doc;
  EXPECT_EQ(cli.doc.at("step"), 150);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 50 + 4 + extra_steps) << cli.doc.dump();
  std::string finding = "F";
  finding += std::to_string(cli.doc.at("finding_id").get<int64_t>());
  auto repro = faultline_cli({"repro", finding}, dir, 300);
  EXPECT_EQ(repro.result.exit_code, 0) << repro.result.output;
  EXPECT_THAT(repro.result.output, HasSubstr("bitwise identical: yes"));
  return cli.doc;
}

std::string helper_launched_per_node(const std::string& dir,
                                     const std::vector<std::string>& launcher_args,
                                     const std::vector<std::string>& wrapper) {
  std::string launcher;  // the command's words up to the script's own, as TOML strings
  for (const auto& word : wrapper) launcher += nlohmann::json(word).dump() + ", ";
  launcher += "\"/usr/bin/python3\", \"" FAULTLINE_SOURCE_DIR
              "/tests/e2e/launchers/spawn_ranks.py\", \"--nnodes\", \"{nnodes}\", "
              "\"--nproc_per_node\", \"{nproc_per_node}\", \"--node_rank\", "
              "\"{node_rank}\", \"--master_addr\", \"{master_addr}\", \"--master_port\", "
              "\"{master_port}\", ";
  for (const auto& arg : launcher_args) launcher += nlohmann::json(arg).dump() + ", ";
  std::ofstream(dir + "/launched.toml") << replaced(
      replaced(read_text(kHelper), "command = [\"/usr/bin/python3\", \"train.py\",",
               "command = [" + launcher + "\"--\", \"/usr/bin/python3\", \"train.py\","),
      "[trainer]\n", "[trainer]\nranks_from = \"torchrun\"\nworkdir = \"" + kExamples + "\"\n");
  return dir + "/launched.toml";
}

int processes_left_mentioning(const std::string& text) {
  int count = 0;
  for (int tries = 0; tries < 50; ++tries) {
    count = processes_mentioning(text, ProcessText::Environment);
    if (count == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return count;
}

void expect_hang_of_rank_one_with_its_stack(const std::string& recipe, const std::string& dir,
                                            std::vector<std::string> sets) {
  sets.insert(sets.end(), {"fault.hang_rank=1", "fault.hang_step=5"});
  auto cli = faultline_cli(
      with_sets({"train", "-c", recipe, "--ranks", "2", "--step-timeout", "5", "--json"}, sets),
      dir, 300);
  ASSERT_EQ(cli.result.exit_code, 1) << cli.result.output;
  const auto& failures = cli.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << cli.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_EQ(failures[0].at("step"), 5);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, HasSubstr("the stacks of rank 1 (SIGUSR1, from its log)"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));  // where train.py's planted hang sleeps
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("in all_reduce")));  // rank 0's, not its own
}

}  // namespace faultline::testing
