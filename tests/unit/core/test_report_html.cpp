// Tests for report/report_html: the page is self-contained and escapes every stored text.
#include "report/report_html.hpp"

#include <gtest/gtest.h>

namespace faultline::report {
namespace {

Report hostile_report() {
  Report report;
  report.title = "Finding F1";
  report.verdict = "Loss <b>spiked</b>";
  report.bad_step = 4;
  report.location = {{"module / parameter", "<img src=x onerror=alert(1)>"}};
  report.has_baseline = true;
  report.config_culprit = {{"optim.lr", "3e-3", "10.0"}};
  report.timeline = {
      {"steps: first bad step", "1 rank · steps 1..4", "fail", "", 7, 4, 1.5, false}};
  report.repro_command = "faultline repro F1";
  report.trainer_command = "faultline-train --set 'a=</script>'";
  report.plots = {{"loss", "Loss", "", {{"run </script>", SeriesRole::Subject, {1, 2}, {3, 2}}}}};
  return report;
}

TEST(ReportHtml, StoredTextIsEscapedEverywhere) {
  const std::string html = render_html(hostile_report());
  EXPECT_EQ(html.find("<img src=x"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("Loss &lt;b&gt;spiked&lt;/b&gt;"), std::string::npos);
  EXPECT_EQ(html.find("run </script>"), std::string::npos);
  EXPECT_EQ(html.find("a=</script>"), std::string::npos);
}

TEST(ReportHtml, ThePageNeedsNothingFromOutside) {
  const std::string html = render_html(hostile_report());
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(html.find("uPlot"), std::string::npos) << "the charting library is inlined";
}

TEST(ReportHtml, ItHoldsTheDiffTimelineAndRepro) {
  const std::string html = render_html(hostile_report());
  EXPECT_NE(html.find("- optim.lr = 3e-3"), std::string::npos);
  EXPECT_NE(html.find("+ optim.lr = 10.0"), std::string::npos);
  EXPECT_NE(html.find("steps: first bad step"), std::string::npos);
  EXPECT_NE(html.find("<pre id=\"repro\">faultline repro F1</pre>"), std::string::npos);
  EXPECT_NE(html.find("\"bad_step\":4"), std::string::npos);
}

}  // namespace
}  // namespace faultline::report
