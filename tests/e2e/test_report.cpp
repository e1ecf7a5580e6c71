// End-to-end: `faultline report` of a real isolate finding (a NaN planted in blocks.1.mlp at
// step 12) and of the failing run it started from, as HTML and Markdown; bad ids are exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";

class Report : public ::testing::Test {
 protected:
  // One isolate for the whole suite: every test reads the same stored finding.
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("report");
    isolate_ = faultline_cli({"isolate", "-c", kMicro, "--json", "--set", "dist.ranks=2", "--set",
                              "fault.nan_step=12", "--set", "fault.nan_layer=blocks.1.mlp"},
                             dir_, 300);
  }
  void SetUp() override {
    ASSERT_EQ(isolate_.result.exit_code, 0) << isolate_.result.output;
    ASSERT_EQ(isolate_.doc.at("finding_id"), 1) << isolate_.doc.dump();
  }
  static std::string dir_;
  static Cli isolate_;
};
std::string Report::dir_;
Cli Report::isolate_;

TEST_F(Report, AFindingAsHtmlAndMarkdownNamesTheStepModuleAndRepro) {
  const std::string html = dir_ + "/f1.html", md = dir_ + "/f1.md";
  auto cli = faultline_cli({"report", "F1", "--html", html, "--md", md}, dir_);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_THAT(cli.result.output, HasSubstr("wrote " + html));
  const std::string page = read_text(html);
  EXPECT_THAT(page, HasSubstr("at step 12 in blocks.1.mlp (forward)"));
  EXPECT_THAT(page, HasSubstr("<pre id=\"repro\">faultline repro F1</pre>"));
  EXPECT_THAT(page, HasSubstr("\"bad_step\":12"));
  EXPECT_THAT(page, HasSubstr("failing run ")) << "the 2-rank failing run is plotted";
  EXPECT_THAT(page, HasSubstr("1-rank replay")) << "beside its 1-rank replay";
  EXPECT_THAT(page, HasSubstr("The search: "));
  EXPECT_THAT(page, Not(HasSubstr("<script src")));
  const std::string markdown = read_text(md);
  EXPECT_THAT(markdown, HasSubstr("| step | `12` |"));
  EXPECT_THAT(markdown, HasSubstr("| module / parameter | `blocks.1.mlp` |"));
  EXPECT_THAT(markdown, HasSubstr("```sh\nfaultline repro F1\n```"));
  EXPECT_THAT(markdown, HasSubstr("✕")) << "the NaN shows in the sparkline";
  EXPECT_THAT(markdown, HasSubstr("▁"));
}

TEST_F(Report, TheFailingRunIsReportedWithItsFailures) {
  const int64_t run = isolate_.doc.at("failing_run").get<int64_t>();
  auto cli = faultline_cli({"report", std::to_string(run)}, dir_);
  ASSERT_EQ(cli.result.exit_code, 0) << cli.result.output;
  EXPECT_THAT(cli.result.output,
              HasSubstr("failed: Training went non-finite (NaN/Inf) at step 12"));
  EXPECT_THAT(cli.result.output, HasSubstr("| nonfinite | 12 |"));
  EXPECT_THAT(cli.result.output, HasSubstr("faultline isolate --run " + std::to_string(run)));
}

// `--md -` is stdout, and only the Markdown goes there: the other file's line is on stderr.
TEST_F(Report, DashIsStdoutForTheMarkdownWhileTheHtmlGoesToItsFile) {
  const std::string html = dir_ + "/dash.html";
  const std::string command = "cd " + dir_ + " && " + FAULTLINE_BIN +
                              " report F1 --db faultline.db --html " + html + " --md - 2>/dev/null";
  const auto shell = run_process({{"/bin/sh", "-c", command}, {}, 60});
  ASSERT_EQ(shell.exit_code, 0) << shell.output;
  EXPECT_EQ(shell.output.rfind("### faultline · Finding F1", 0), 0u) << shell.output;
  EXPECT_THAT(shell.output, Not(HasSubstr("wrote")));
  EXPECT_THAT(read_text(html), HasSubstr("<!doctype html>"));
  EXPECT_FALSE(std::ifstream(dir_ + "/-").good()) << "no file named '-'";
  auto both = faultline_cli({"report", "F1", "--md", "-", "--html", "-"}, dir_);
  EXPECT_EQ(both.result.exit_code, 2);
  EXPECT_THAT(both.result.output, HasSubstr("--html and --md both write to stdout"));
}

TEST_F(Report, UnknownSubjectsAreUsageErrors) {
  auto missing = faultline_cli({"report", "F9"}, dir_);
  EXPECT_EQ(missing.result.exit_code, 2);
  EXPECT_THAT(missing.result.output, HasSubstr("faultline: error: no finding F9"));
  auto word = faultline_cli({"report", "latest"}, dir_);
  EXPECT_EQ(word.result.exit_code, 2);
  EXPECT_THAT(word.result.output, HasSubstr("'latest' is neither a finding nor a run"));
  auto folder = faultline_cli({"report", "F1", "--html", dir_ + "/no/such/dir/x.html"}, dir_);
  EXPECT_EQ(folder.result.exit_code, 2);
  EXPECT_THAT(folder.result.output, HasSubstr("cannot write the report"));
  // A browser that fails to draw is named, not a crash (the browser test draws a real PNG).
  ::setenv("FAULTLINE_CHROMIUM", "/bin/false", 1);
  auto png = faultline_cli({"report", "F1", "--png", dir_ + "/x.png"}, dir_);
  ::unsetenv("FAULTLINE_CHROMIUM");
  EXPECT_EQ(png.result.exit_code, 2);
  EXPECT_THAT(png.result.output, HasSubstr("chromium could not draw the PNG"));
}

}  // namespace

// The CUPTI probe needs a GPU; beside a real run's metrics, the file it would have written
// (10 ms intervals over the run, each 60 % compute, 10 % NCCL, 30 % idle) is imported with the
// run, and the report shows what the GPU did per step: every step's share is the intervals'.
TEST(ReportGpu, AnImportedRunsGpuRecordsAreItsReportsGpuTableAndPlot) {
  const std::string dir = make_temp_dir("report-gpu");
  auto train = faultline_cli({"train", "-c", kMicro, "--steps", "12", "--json"}, dir, 300);
  ASSERT_EQ(train.result.exit_code, 0) << train.result.output;
  const std::string job = dir + "/job";
  std::filesystem::create_directories(job);
  const std::string metrics = read_text(dir + "/runs/run-1/metrics.rank0.jsonl");
  std::ofstream(job + "/metrics.rank0.jsonl") << metrics;
  double unix_start = 0, t_start = 0, t_last = 0;
  std::vector<double> step_ms;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.value("name", "") == "start") {
      unix_start = record.at("unix_time").get<double>();
      t_start = record.at("t").get<double>();
    } else if (record.at("type") == "step") {
      t_last = record.at("t").get<double>();
      step_ms.push_back(record.at("step_ms").get<double>());
    }
  }
  ASSERT_GT(unix_start, 0) << metrics;
  ASSERT_EQ(step_ms.size(), 12u);
  std::ofstream gpu(job + "/metrics.rank0.jsonl.gpu.jsonl");
  size_t intervals = 0;
  for (double t0 = unix_start - 0.5; t0 < unix_start + (t_last - t_start) + 0.5; t0 += 0.01) {
    gpu << nlohmann::json{{"v", 1},       {"type", "gpu"},   {"rank", 0},
                          {"t", 0},       {"unix_t0", t0},   {"unix_t1", t0 + 0.01},
                          {"busy_ms", 7}, {"compute_ms", 6}, {"nccl_ms", 1},
                          {"idle_ms", 3}, {"kernels", 40},   {"nccl_kernels", 1}}
               .dump()
        << "\n";
    ++intervals;
  }
  gpu.close();
  auto imported = faultline_cli({"import", job, "--json"}, dir, 120);
  ASSERT_EQ(imported.result.exit_code, 0) << imported.result.output;
  const std::string run = std::to_string(imported.doc.at("run_id").get<int64_t>());
  const std::string html = dir + "/gpu.html";
  auto report = faultline_cli({"report", run, "--html", html, "--md", "-"}, dir);
  ASSERT_EQ(report.result.exit_code, 0) << report.result.output;
  const std::string& md = report.result.output;
  const std::string header = "GPU per step, medians (CUPTI probe):\n\n| rank | steps | step ms |";
  ASSERT_THAT(md, HasSubstr(header));
  const auto row_at = md.find("\n| 0 | 12 | ", md.find(header));
  ASSERT_NE(row_at, std::string::npos) << md;
  // | 0 | 12 | step | compute | NCCL | idle | idle while data loads | covered |
  std::vector<std::string> cells;
  std::istringstream row(md.substr(row_at + 1, md.find('\n', row_at + 1) - row_at - 1));
  for (std::string cell; std::getline(row, cell, '|');)
    if (cell.find_first_not_of(' ') != std::string::npos) cells.push_back(cell);
  ASSERT_EQ(cells.size(), 8u) << md;
  std::sort(step_ms.begin(), step_ms.end());
  const double median_ms = (step_ms[5] + step_ms[6]) / 2;
  EXPECT_NEAR(std::stod(cells[2]), median_ms, 0.051);
  EXPECT_NEAR(std::stod(cells[3]), 0.6 * median_ms, 0.051 + 0.01 * median_ms);
  EXPECT_NEAR(std::stod(cells[4]), 0.1 * median_ms, 0.051 + 0.01 * median_ms);
  EXPECT_NEAR(std::stod(cells[5]), 0.3 * median_ms, 0.051 + 0.01 * median_ms);
  EXPECT_THAT(cells[7], HasSubstr("100%"));
  const std::string page = read_text(html);
  EXPECT_THAT(page, HasSubstr("GPU per step, medians (CUPTI probe)"));
  EXPECT_THAT(page, HasSubstr(R"("id":"gpu_time")"));
  auto shown = faultline_cli({"show", run}, dir);
  ASSERT_EQ(shown.result.exit_code, 0) << shown.result.output;
  EXPECT_THAT(shown.result.output,
              HasSubstr("  gpu:      compute 60%, NCCL 10%, idle 30% over 12 joined step(s) "
                        "(CUPTI; per step: faultline report " +
                        run + ")\n"));
  auto trained = faultline_cli({"show", "1"}, dir);
  EXPECT_THAT(trained.result.output, Not(HasSubstr("gpu:"))) << "no probe, no line";
  // And as stored, one row per interval.
  auto exported = faultline_cli({"export", run, "--what", "gpu"}, dir);
  ASSERT_EQ(exported.result.exit_code, 0) << exported.result.output;
  EXPECT_EQ(std::count(exported.result.output.begin(), exported.result.output.end(), '\n'),
            static_cast<long>(intervals + 1));
}
