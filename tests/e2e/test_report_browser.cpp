// In a real browser: headless Chromium opens the HTML report of a real isolate finding. After
// the page's scripts ran, its text names the step, module and repro command; the plot area of a
// screenshot is not blank; and the page asked the network for nothing (a control page that does
// load a remote image shows the check can fail); `--png` draws the loss plot. Skipped, with the
// reason, without Chromium.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/cli.hpp"

using namespace faultline::testing;
using ::testing::HasSubstr;

namespace {

const std::string kMicro = FAULTLINE_SOURCE_DIR "/tests/e2e/recipes/micro.toml";
const std::string kPngRegion = FAULTLINE_SOURCE_DIR "/tests/e2e/png_region.py";

std::string chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(path)) return path;
  return "";
}

// Headless Chromium on a file, with no background traffic of its own: whatever the net log
// shows, the page asked for. `what` is --dump-dom or --screenshot=FILE.
ProcessResult browse(const std::string& page, const std::string& what, const std::string& net_log,
                     const std::string& dir) {
  return run_process(
      {{chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
        "--user-data-dir=" + make_temp_dir("chromium-profile"), "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-default-apps", "--disable-extensions", "--hide-scrollbars",
        "--window-size=1280,1000", "--virtual-time-budget=10000", "--log-net-log=" + net_log, what,
        "file://" + page},
       {{"HOME", dir}},
       120});
}

// The network URLs the page asked for: URL_REQUEST_START_JOB events of the net log with an
// initiator (a file:// page is "null"). The browser's own traffic (update checks, network time)
// is "not an origin" and is not the page's doing.
std::vector<std::string> remote_requests(const std::string& net_log) {
  const auto log = nlohmann::json::parse(read_text(net_log));
  const int start_job = log.at("constants").at("logEventTypes").at("URL_REQUEST_START_JOB");
  std::vector<std::string> urls;
  const std::regex remote("^(https?|wss?|ftp)://.*");
  for (const auto& event : log.at("events")) {
    if (event.value("type", -1) != start_job || !event.contains("params")) continue;
    const auto& params = event.at("params");
    const std::string url = params.value("url", "");
    if (params.value("initiator", "") != "not an origin" && std::regex_match(url, remote))
      urls.push_back(url);
  }
  return urls;
}

class ReportBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (chromium().empty())
      GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh installs it)";
  }
};

TEST_F(ReportBrowser, TheReportOfARealFindingRendersOfflineWithItsPlots) {
  const std::string dir = make_temp_dir("report-browser");
  auto isolate = faultline_cli({"isolate", "-c", kMicro, "--json", "--set", "fault.nan_step=12",
                                "--set", "fault.nan_layer=blocks.1.mlp"},
                               dir, 300);
  ASSERT_EQ(isolate.result.exit_code, 0) << isolate.result.output;
  const std::string page = dir + "/f1.html";
  auto report = faultline_cli({"report", "F1", "--html", page}, dir);
  ASSERT_EQ(report.result.exit_code, 0) << report.result.output;

  // 1. The DOM after the scripts ran: the plots were drawn, and the text is there.
  auto dom = browse(page, "--dump-dom", dir + "/dom.netlog", dir);
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  EXPECT_THAT(dom.output, HasSubstr("data-rendered=\"5\"")) << "five plots drawn by the script";
  EXPECT_THAT(dom.output, HasSubstr("class=\"uplot"));
  EXPECT_THAT(dom.output, HasSubstr("at step 12 in blocks.1.mlp (forward)"));
  EXPECT_THAT(dom.output, HasSubstr("<dd>blocks.1.mlp</dd>"));
  EXPECT_THAT(dom.output, HasSubstr("faultline repro F1"));
  EXPECT_EQ(remote_requests(dir + "/dom.netlog"), std::vector<std::string>{});

  // 2. A screenshot: the loss plot (the first thing under the verdict) is drawn, not blank, and
  // has the failing run's red line in it.
  const std::string shot = dir + "/f1.png";
  auto screenshot = browse(page, "--screenshot=" + shot, dir + "/shot.netlog", dir);
  ASSERT_EQ(screenshot.exit_code, 0) << screenshot.output;
  auto stats = run_process(
      {{"/usr/bin/python3", kPngRegion, shot, "40", "150", "1240", "400", "cf222e"}, {}, 60});
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  std::smatch numbers;
  ASSERT_TRUE(
      std::regex_search(stats.output, numbers, std::regex("variance=([0-9.]+) matching=([0-9]+)")))
      << stats.output;
  EXPECT_GT(std::stod(numbers[1]), 50.0) << stats.output;
  EXPECT_GT(std::stoi(numbers[2]), 200) << "the failing run's line: " << stats.output;
  EXPECT_EQ(remote_requests(dir + "/shot.netlog"), std::vector<std::string>{});

  // 3. --png: the loss plot alone, drawn by the same Chromium.
  const std::string png = dir + "/f1-loss.png";
  auto drawn = faultline_cli({"report", "F1", "--png", png}, dir);
  ASSERT_EQ(drawn.result.exit_code, 0) << drawn.result.output;
  auto png_stats = run_process(
      {{"/usr/bin/python3", kPngRegion, png, "0", "0", "1200", "420", "cf222e"}, {}, 60});
  EXPECT_THAT(png_stats.output, HasSubstr("width=1200 height=420"));
  ASSERT_TRUE(std::regex_search(png_stats.output, numbers, std::regex("variance=([0-9.]+)")))
      << png_stats.output;
  EXPECT_GT(std::stod(numbers[1]), 50.0) << png_stats.output;

  // 4. The network check sees a request when a page makes one (nothing listens on port 9).
  const std::string control = dir + "/control.html";
  std::ofstream(control) << "<!doctype html><img src=\"http://127.0.0.1:9/remote.png\">";
  auto loaded = browse(control, "--dump-dom", dir + "/control.netlog", dir);
  ASSERT_EQ(loaded.exit_code, 0) << loaded.output;
  EXPECT_EQ(remote_requests(dir + "/control.netlog"),
            std::vector<std::string>{"http://127.0.0.1:9/remote.png"});
}

}  // namespace
