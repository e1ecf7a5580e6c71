// End-to-end: how a job of the user's PyTorch script (examples/pytorch/train.py) ended, read from
// what it left: a hang its time limit stopped, a rank that died and the peer it broke, a time
// limit that stopped a healthy job. Each is imported, and isolate replays the failures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>

#include "support/pytorch_jobs.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

// A job of two ranks whose rank 1 never comes back at step 130, stopped from outside as a job's
// time limit stops it: every task gets SIGUSR1 (sbatch --signal=USR1@60: the helper writes its
// stacks to FAULTLINE_STACKS), then SIGTERM, 12 s after the hang began. Rank 0 waits in the
// allreduce of step 130 then. Both end events say SIGTERM stopped them, long after their last step
// records: they had stopped making progress, so the import reads the hang from the collective
// heartbeats, and isolate replays it from the checkpoint of step 100.
TEST(ExternalTrainer, AJobStoppedByItsTimeLimitWhileARankHungIsImportedAsThatRanksHang) {
  const std::string dir = make_temp_dir("ext-import-hang");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200",         "--hang-rank",
                                         "1",       "--hang-step", "130"};
  // Stopped once rank 0 waits in step 130's allreduce; rank 1 is then at its planted sleep.
  const std::string rank0 = job + "/metrics.rank0.jsonl";
  const std::string waits = R"("op":"allreduce","step":130,)";
  std::vector<ProcessSpec> ranks = {
      job_rank_stopped_by_time_limit(job, 0, 2, port, args, rank0, waits, "in all_reduce", 12),
      job_rank_stopped_by_time_limit(job, 1, 2, port, args, rank0, waits, "in at_step_start", 12)};
  for (const auto& ran : run_processes(ranks)) ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  // Rank 0 was blocked in the allreduce, out of Python's reach, and still wrote its end event.
  EXPECT_THAT(read_text(rank0), HasSubstr(R"("status":"terminated")"));

  auto imported =
      import_helper_job(dir, job, {"train.steps=200", "fault.hang_rank=1", "fault.hang_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << imported.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_EQ(failures[0].at("step"), 130);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, HasSubstr("rank(s) 1 never entered collective #132 (step 130) that rank(s) "
                                "0 wait in; no rank ended by itself"));
  EXPECT_THAT(detail, HasSubstr("the stacks of rank 1 (from " + job + "/stacks.rank1.txt)"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("in all_reduce")));  // rank 0's, not its own

  auto cli = isolate_imported(dir, imported, {"--step-timeout", "5"});
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "hang");
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_EQ(cli.doc.at("min_scale").at("ranks"), 2);  // one rank replaying both cannot hang
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 2 * 30) << cli.doc.dump();
  // The command to paste starts both ranks, as the trial did.
  EXPECT_THAT(cli.doc.at("repro_command").get<std::string>(),
              HasSubstr("for r in $(seq 0 1); do RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 "));
}

// Rank 1 of a job dies of SIGSEGV at step 130; rank 0, in the allreduce, gets a connection
// error, and the helper's end event says so. The import names both, the rank that stopped writing
// first; isolate replays from the checkpoint of step 100 and names rank 1 with its stacks.
TEST(ExternalTrainer, ARankThatDiedInAJobIsNamedBeforeThePeerItsDeathBroke) {
  const std::string dir = make_temp_dir("ext-import-crash");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200",          "--crash-rank",
                                         "1",       "--crash-step", "130"};
  const auto ran =
      run_processes({job_rank(job, 0, 2, port, args), job_rank(job, 1, 2, port, args)});
  ASSERT_EQ(ran[0].exit_code, 1) << ran[0].output;  // the connection error, raised
  ASSERT_EQ(ran[1].signal, SIGSEGV) << ran[1].output;

  auto imported = import_helper_job(
      dir, job, {"train.steps=200", "fault.crash_rank=1", "fault.crash_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), (std::vector<std::string>{"crash", "crash"}))
      << imported.doc.dump();
  EXPECT_EQ(failures[0].at("rank"), 1);
  EXPECT_THAT(failures[0].at("detail").get<std::string>(),
              HasSubstr("rank 1 wrote no end event after step 129"));
  EXPECT_EQ(failures[1].at("rank"), 0);
  EXPECT_THAT(failures[1].at("detail").get<std::string>(),
              HasSubstr("rank 0 ended in step 130 with an error: RuntimeError: "));
  EXPECT_THAT(
      failures[1].at("detail").get<std::string>(),
      HasSubstr("; it waited in collective #132 (step 130), which rank(s) 1 never entered"));

  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "crash");
  EXPECT_EQ(cli.doc.at("rank"), 1);
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  const std::string detail = cli.doc.at("detail");
  EXPECT_THAT(detail, HasSubstr("rank 1 died of SIGSEGV; its stacks (from its log):"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));
  EXPECT_THAT(detail, ::testing::Not(HasSubstr("Extension modules")));

  // The command to paste starts both ranks from the checkpoint, on the port the shell gives:
  // rank 1 dies at step 130 again, and rank 0 sees it go.
  const auto pasted =
      run_process({{"/bin/bash", "-c", cli.doc.at("repro_command").get<std::string>()},
                   {{"MASTER_PORT", std::to_string(free_port())}},
                   300});
  EXPECT_FALSE(pasted.timed_out) << pasted.output;
  EXPECT_THAT(pasted.output, HasSubstr("Segmentation fault"));
  EXPECT_THAT(pasted.output, HasSubstr("RuntimeError"));  // Gloo's words for it vary
}

// The same on one rank: no collective heartbeats. The helper's end event says SIGTERM stopped
// it, 12 s after its last step record (its steps a few ms apart): it had stopped making
// progress, a hang, with the stacks it wrote; the replay from its checkpoint hangs there too.
TEST(ExternalTrainer, AOneRankJobStoppedLongAfterItsLastStepIsAHangItsReplayRepeats) {
  const std::string dir = make_temp_dir("ext-import-hang1");
  const std::string job = dir + "/job";
  auto ran = run_process(job_rank_stopped_by_time_limit(
      job, 0, 1, std::to_string(free_port()),
      {"--steps", "200", "--hang-rank", "0", "--hang-step", "130"}, job + "/metrics.rank0.jsonl",
      R"("type":"step","step":129,)", "in at_step_start", 12));
  ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  auto imported =
      import_helper_job(dir, job, {"train.steps=200", "fault.hang_rank=0", "fault.hang_step=130"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const auto& failures = imported.doc.at("failures");
  ASSERT_EQ(kinds_of(failures), std::vector<std::string>{"hang"}) << imported.doc.dump();
  EXPECT_EQ(failures[0].at("step"), 130);
  const std::string detail = failures[0].at("detail");
  EXPECT_THAT(detail, ::testing::ContainsRegex("rank 0 wrote no step record for 1[0-9] s after "
                                               "step 129 before SIGTERM stopped it"));
  EXPECT_THAT(detail, HasSubstr("in at_step_start"));  // its stacks, from stacks.rank0.txt

  auto cli = isolate_imported(dir, imported);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_EQ(cli.doc.at("kind"), "hang");
  EXPECT_EQ(cli.doc.at("step"), 130);
  EXPECT_EQ(cli.doc.at("min_scale").at("from_step"), 100);
  EXPECT_LE(cli.doc.at("steps_executed").get<int64_t>(), 30) << cli.doc.dump();
  // No --step-timeout: the stored run's steps of a few ms make it the 10 s floor, not 60 s.
  EXPECT_THAT(cli.doc.at("detail").get<std::string>(),
              ::testing::ContainsRegex("no step record for 1[0-9] s"));
  // One rank: no loop; its folder made first, its metrics file named.
  EXPECT_THAT(
      cli.doc.at("repro_command").get<std::string>(),
      ::testing::StartsWith("mkdir -p " + kExamples + "/faultline-repro && env -C " + kExamples +
                            " FAULTLINE_METRICS=faultline-repro/metrics.rank0.jsonl "));
}

// A 2-rank job its time limit stops while it trains (at step 50 of 200): each rank's end event
// says SIGTERM stopped it (the helper writes it from a thread, so a rank blocked in an allreduce
// writes it too, and still dies of the signal at once). That is no crash: the import passes and
// names the ranks stopped.
TEST(ExternalTrainer, AJobItsTimeLimitStopsWhileItTrainsIsNoCrash) {
  const std::string dir = make_temp_dir("ext-import-timelimit");
  const std::string job = dir + "/job";
  const std::string port = std::to_string(free_port());
  const std::vector<std::string> args = {"--steps", "200"};
  std::vector<ProcessSpec> ranks = {job_rank(job, 0, 2, port, args),
                                    job_rank(job, 1, 2, port, args)};
  const std::string rank0 = job + "/metrics.rank0.jsonl";
  for (auto& rank : ranks)
    rank.signal_when = [rank0, sent = false]() mutable {
      if (sent || read_text(rank0).find(R"("type":"step","step":50,)") == std::string::npos)
        return 0;
      sent = true;
      return SIGTERM;
    };
  for (const auto& ran : run_processes(ranks)) ASSERT_EQ(ran.signal, SIGTERM) << ran.output;
  auto imported = import_helper_job(dir, job, {"train.steps=200"});
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  EXPECT_EQ(imported.doc.at("failures"), nlohmann::json::array()) << imported.doc.dump();
  EXPECT_EQ(imported.doc.at("verdict"), "pass");
  EXPECT_EQ(imported.doc.at("terminated"), nlohmann::json::array({0, 1}));
  auto shown = faultline_cli({"import", job, "-c", kHelper, "--set", "train.steps=200"}, dir);
  EXPECT_THAT(shown.result.output,
              HasSubstr("note: rank(s) 0,1 were stopped by SIGTERM after step"));
}
