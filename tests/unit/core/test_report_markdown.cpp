// Tests for report/report_markdown: a table, the sparkline, the diff and the repro command.
#include "report/report_markdown.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace faultline::report {
namespace {

TEST(ReportMarkdown, HasTheFactsSparklineDiffAndRepro) {
  Report report;
  report.title = "Finding F2";
  report.verdict = "Training went non-finite (NaN/Inf) at step 3.";
  report.bad_step = 3;
  report.location = {{"step", "3"}, {"module / parameter", "blocks.1.mlp"}};
  report.config_culprit = {{"optim.lr", "3e-3", "10.0"}};
  report.loss = {4, 3, NAN};
  report.repro_command = "faultline repro F2";
  const std::string md = render_markdown(report);
  EXPECT_NE(md.find("**Training went non-finite (NaN/Inf) at step 3.**"), std::string::npos);
  EXPECT_NE(md.find("| module / parameter | `blocks.1.mlp` |"), std::string::npos) << md;
  EXPECT_NE(md.find("█▁✕"), std::string::npos) << md;
  EXPECT_NE(md.find("- optim.lr = 3e-3\n+ optim.lr = 10.0"), std::string::npos) << md;
  EXPECT_NE(md.find("```sh\nfaultline repro F2\n```"), std::string::npos) << md;
}

TEST(ReportMarkdown, TheLinesBelowADetailAreACodeBlockUnderTheFacts) {
  Report report;
  report.location = {{"detail", "the stacks of rank 1:"}};
  report.detail_block = "    Current thread 0x01:\n      File \"train.py\", line 209";
  const std::string md = render_markdown(report);
  EXPECT_NE(md.find("| detail | `the stacks of rank 1:` |\n\n```\n    Current thread 0x01:\n"
                    "      File \"train.py\", line 209\n```\n"),
            std::string::npos)
      << md;
}

TEST(ReportMarkdown, CellsCannotBreakTheTable) {
  EXPECT_EQ(markdown_cell("a|b\nc`d"), "a\\|b c'd");
}

}  // namespace
}  // namespace faultline::report
