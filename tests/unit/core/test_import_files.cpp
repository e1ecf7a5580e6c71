// Tests for harness/trial/import_files.cpp: one rank's metrics file of a job read as the import
// reads it: a restart's parts, the last part's heartbeats and end, the stacks beside it.
#include "harness/trial/import_files.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace faultline::harness {
namespace {
using faultline::testing::ScratchDir;
using faultline::testing::write_file;
using nlohmann::json;

std::string line(json record) {
  record["v"] = 1;
  record["rank"] = 0;
  record["t"] = 0.5;
  return record.dump() + "\n";
}

std::string step(int64_t number) {
  return line({{"type", "step"},
               {"step", number},
               {"loss", 2.0},
               {"grad_norm", 1.0},
               {"lr", 0.1},
               {"step_ms", 5.0},
               {"data_ms", 0.1},
               {"comm_ms", 1.0},
               {"tokens", 128},
               {"mem_bytes", 1}});
}

std::string collective(int64_t number, int64_t seq) {
  return line({{"type", "event"}, {"name", "collective"}, {"step", number}, {"seq", seq}});
}

std::vector<int64_t> steps_of(const RankFile& file) {
  std::vector<int64_t> steps;
  for (const auto& record : file.records)
    if (const auto* step = std::get_if<StepRecord>(&record)) steps.push_back(step->step);
  return steps;
}

TEST(ImportFiles, ARestartedJobKeepsTheLastRunOfEachStepAndItsLastPartsEnd) {
  ScratchDir dir;
  // Part 1: steps 1..5, then it waits in collective #6 and is killed (no end event). Part 2
  // resumes from the checkpoint of step 3, runs 4..8 (its own collectives from #1), and an
  // exception ends it.
  std::string text = line({{"type", "event"}, {"name", "start"}, {"config", {{"lr", 0.1}}}});
  for (int64_t s = 1; s <= 5; ++s) text += collective(s, s) + step(s);
  text += collective(6, 6);
  text += line({{"type", "event"}, {"name", "start"}, {"config", {{"lr", 0.05}}}});
  text += line({{"type", "event"}, {"name", "resume"}, {"step", 3}, {"path", "/x.pt"}});
  for (int64_t s = 4; s <= 8; ++s) text += collective(s, s - 3) + step(s);
  text += line({{"type", "event"},
                {"name", "end"},
                {"status", "error"},
                {"error", "RuntimeError: connection reset"}});
  write_file(dir.file("metrics.rank0.jsonl"), text);
  write_file(dir.file("stacks.rank0.txt"),
             "Current thread 0x01 (most recent call first):\n  File \"t.py\", line 3 in f\n");

  const RankFile file = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  EXPECT_EQ(steps_of(file), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(file.last_step, 8);
  ASSERT_EQ(file.restarts.size(), 1u);
  EXPECT_EQ(file.restarts[0].stopped_after, 5);
  EXPECT_FALSE(file.restarts[0].ended);
  EXPECT_EQ(file.restarts[0].resumed_from, 3);
  EXPECT_EQ(file.restarts[0].rerun, 2);                // steps 4 and 5 ran twice
  EXPECT_EQ(file.start->at("config").at("lr"), 0.05);  // the last part's config
  EXPECT_EQ(file.collective_entered, 5);               // not part 1's #6
  EXPECT_TRUE(file.ended);
  EXPECT_EQ(file.end.status, EndStatus::Error);
  EXPECT_EQ(file.end.error, "RuntimeError: connection reset");
  EXPECT_EQ(file.stacks,
            "\n    Current thread 0x01 (most recent call first):\n      File \"t.py\", "
            "line 3 in f");
}

// faultline-train --out out/run1 names its checkpoints from its own working directory
// (out/run1/checkpoints/...), and a folder moved elsewhere has its absolute paths stale: both are
// found below the run's folder by their last parts. One found nowhere is named with the folder.
TEST(ImportFiles, ACheckpointIsFoundBelowTheRunsFolderWhateverDirectoryItsPathWasFrom) {
  ScratchDir dir;
  std::filesystem::create_directories(dir.file("checkpoints"));
  write_file(dir.file("checkpoints/step-00000010.ckpt"), "x");
  write_file(dir.file("checkpoints/step-00000020.ckpt"), "x");
  auto checkpoint = [](int64_t number, const std::string& path) {
    return line({{"type", "event"}, {"name", "checkpoint"}, {"step", number}, {"path", path}});
  };
  std::string text = line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 1; s <= 20; ++s) {
    text += step(s);
    if (s == 10) text += checkpoint(s, "out/run1/checkpoints/step-00000010.ckpt");
    if (s == 20) text += checkpoint(s, "/moved/away/checkpoints/step-00000020.ckpt");
  }
  write_file(dir.file("metrics.rank0.jsonl"), text);
  const RankFile file = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  std::vector<std::string> paths;
  for (const auto& record : file.records)
    if (const auto* event = std::get_if<EventRecord>(&record); event && event->name == "checkpoint")
      paths.push_back(json::parse(event->json).at("path"));
  EXPECT_EQ(paths, (std::vector<std::string>{dir.file("checkpoints/step-00000010.ckpt"),
                                             dir.file("checkpoints/step-00000020.ckpt")}));

  write_file(dir.file("metrics.rank0.jsonl"),
             text + checkpoint(21, "out/run1/checkpoints/step-00000021.ckpt"));
  const auto errors = faultline::testing::user_errors(
      [&] { read_rank_file(find_run_files(dir.path(), 0, nullptr), 0); });
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].what, "the checkpoint of step 21 that line 24 names is missing: " +
                                dir.file("out/run1/checkpoints/step-00000021.ckpt"));
}

TEST(ImportFiles, EachRestartSaysWhereThePartBeforeItStopped) {
  ScratchDir dir;
  // Part 1 runs 1..9 and is stopped by SIGTERM (its end event says so: a requeue); part 2
  // resumes from 5 and stops after 7 with no end event; part 3 resumes from 5 again and runs to
  // 10 with an end event.
  std::string text = line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 1; s <= 9; ++s) text += step(s);
  text += line({{"type", "event"}, {"name", "end"}, {"status", "terminated"}});
  for (const int64_t last : {7, 10}) {
    text += line({{"type", "event"}, {"name", "start"}});
    text += line({{"type", "event"}, {"name", "resume"}, {"step", 5}, {"path", "/x.pt"}});
    for (int64_t s = 6; s <= last; ++s) text += step(s);
  }
  write_file(dir.file("metrics.rank0.jsonl"),
             text + line({{"type", "event"}, {"name", "end"}, {"status", "ok"}}));
  const RankFile file = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  EXPECT_EQ(steps_of(file), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  ASSERT_EQ(file.restarts.size(), 2u);
  EXPECT_EQ(file.restarts[0].stopped_after, 9);
  EXPECT_EQ(file.restarts[0].rerun, 4);          // 6..9
  EXPECT_EQ(file.restarts[1].stopped_after, 7);  // part 2's last step, not part 1's
  EXPECT_EQ(file.restarts[1].rerun, 2);          // 6..7
  EXPECT_TRUE(file.restarts[0].ended && file.restarts[0].terminated);
  EXPECT_FALSE(file.restarts[1].ended || file.restarts[1].terminated);
  EXPECT_EQ(file.last_step, 10);
  EXPECT_TRUE(file.ended);
}

TEST(ImportFiles, AJobThatRanOnceHasNoRestartAndItsHeartbeats) {
  ScratchDir dir;
  std::string text = line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 1; s <= 3; ++s) text += collective(s, s) + step(s);
  write_file(dir.file("metrics.rank0.jsonl"), text + collective(4, 4));
  const RankFile file = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  EXPECT_TRUE(file.restarts.empty());
  EXPECT_EQ(file.last_step, 3);
  EXPECT_EQ(file.collective_entered, 4);
  EXPECT_FALSE(file.ended);
  EXPECT_EQ(file.stacks, "");
}

TEST(ImportFiles, RecordsArePassedOnInOrderAndOnlyARestartedFileIsHeld) {
  ScratchDir dir;
  std::string once = line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 1; s <= 4; ++s) once += step(s);
  write_file(dir.file("metrics.rank0.jsonl"), once);
  std::string restarted = once + line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 3; s <= 5; ++s) restarted += step(s);
  write_file(dir.file("metrics.rank1.jsonl"), restarted);
  const auto files = find_run_files(dir.path(), 0, nullptr);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    std::vector<int64_t> passed;
    const RankFile file = read_rank_file(files, rank, [&](const MetricsRecord& record) {
      if (const auto* s = std::get_if<StepRecord>(&record)) passed.push_back(s->step);
    });
    EXPECT_TRUE(file.records.empty());
    const std::vector<int64_t> expected =
        rank == 0 ? std::vector<int64_t>{1, 2, 3, 4} : std::vector<int64_t>{1, 2, 3, 4, 5};
    EXPECT_EQ(passed, expected);  // rank 1: the second run of steps 3 and 4
    EXPECT_EQ(file.last_step, rank == 0 ? 4 : 5);
    EXPECT_EQ(file.restarts.size(), rank == 0 ? 0u : 1u);
  }
}

TEST(ImportFiles, ALastRecordCutOffMidLineIsMarkedNotRefused) {
  ScratchDir dir;
  std::string text = line({{"type", "event"}, {"name", "start"}});
  for (int64_t s = 1; s <= 3; ++s) text += step(s);
  const std::string fourth = step(4);
  write_file(dir.file("metrics.rank0.jsonl"), text + fourth.substr(0, fourth.size() / 2));
  const RankFile file = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  EXPECT_EQ(steps_of(file), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(file.cut_off_line, 5);
  EXPECT_EQ(file.malformed.size(), 1u);
  EXPECT_FALSE(file.ended);

  // A malformed line with its newline was written whole: malformed, not cut off.
  write_file(dir.file("metrics.rank0.jsonl"), text + "{not json\n" + step(4));
  const RankFile whole = read_rank_file(find_run_files(dir.path(), 0, nullptr), 0);
  EXPECT_EQ(whole.cut_off_line, 0);
  EXPECT_EQ(whole.malformed.size(), 1u);
  EXPECT_EQ(whole.last_step, 4);
}

// A run with the CUPTI probe has a second file per rank: its gpu records are imported with the
// rank's records, whether the file is streamed or held for a restart; a bad line is malformed.
TEST(ImportFiles, TheProbesGpuRecordsBesideAMetricsFileAreKept) {
  ScratchDir dir;
  std::string once = line({{"type", "event"}, {"name", "start"}, {"unix_time", 1.7e9}});
  for (int64_t s = 1; s <= 2; ++s) once += step(s);
  write_file(dir.file("metrics.rank0.jsonl"), once);
  write_file(dir.file("metrics.rank1.jsonl"), once + line({{"type", "event"}, {"name", "start"}}));
  const std::string interval =
      line({{"type", "gpu"}, {"unix_t0", 1.7e9}, {"unix_t1", 1.7e9 + 0.1}, {"busy_ms", 80}});
  for (int rank : {0, 1})
    write_file(dir.file(fmt::format("metrics.rank{}.jsonl.gpu.jsonl", rank)),
               interval + "{not json\n" + interval);
  const auto files = find_run_files(dir.path(), 0, nullptr);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);  // rank 1's file may hold a restart: it is held, then passed on
    std::vector<double> busy;
    const RankFile file = read_rank_file(files, rank, [&](const MetricsRecord& record) {
      if (const auto* gpu = std::get_if<GpuRecord>(&record)) busy.push_back(gpu->busy_ms);
    });
    EXPECT_EQ(busy, (std::vector<double>{80, 80}));
    ASSERT_EQ(file.malformed.size(), 1u);
    EXPECT_NE(
        file.malformed[0].second.find("metrics.rank" + std::to_string(rank) + ".jsonl.gpu.jsonl"),
        std::string::npos)
        << file.malformed[0].second;
    EXPECT_EQ(file.last_step, 2);
  }
}

TEST(ImportFiles, ALogRestartedIntoTheSameFileIsSplitWhereItsStepGoesBack) {
  ScratchDir dir;
  // A requeued job appends to its log: 1..7, then again from the checkpoint of step 4: 5..9.
  std::string text = "starting\n";
  for (int s = 1; s <= 7; ++s) text += fmt::format("step {} loss 2.5\n", s);
  text += "resuming\n";
  for (int s = 5; s <= 9; ++s) text += fmt::format("step {} loss 2.0\n", s);
  write_file(dir.file("train.log"), text);
  const auto log = LogRecords::compile(R"(step (?P<step>\d+) loss (?P<loss>\S+))", "", "", "");
  const RankFile file = read_rank_file(find_run_files(dir.file("train.log"), 0, &log), 0);
  EXPECT_EQ(steps_of(file), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
  for (const auto& record : file.records)
    if (const auto* s = std::get_if<StepRecord>(&record); s && s->step >= 5) {
      EXPECT_EQ(s->loss, 2.0) << "step " << s->step << " is the second part's";
    }
  ASSERT_EQ(file.restarts.size(), 1u);
  EXPECT_EQ(file.restarts[0].stopped_after, 7);
  EXPECT_EQ(file.restarts[0].resumed_from, 4);
  EXPECT_EQ(file.restarts[0].rerun, 3);  // 5..7
  EXPECT_EQ(file.last_step, 9);
}

}  // namespace
}  // namespace faultline::harness
