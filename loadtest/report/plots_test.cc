#include "loadtest/report/plots.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace rankd::loadtest {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Report TwoSteps() {
  Report r;
  for (int i = 0; i < 2; ++i) {
    StepResult s;
    s.mode = "open";
    s.target_rps = 100 * (i + 1);
    s.achieved_rps = 99.5 * (i + 1);
    s.latency.count = 100;
    s.latency.p50_us = 200;
    s.latency.p90_us = 300;
    s.latency.p99_us = 900;
    s.latency.p999_us = 1500;
    s.latency.max_us = 2000;
    s.intervals = {{0, 1, true, 100, 0, 210, 800, 900, 1}, {1, 1, false, 0, 0, 0, 0, 0, 0}};
    r.steps.push_back(s);
  }
  return r;
}

TEST(PlotsTest, ScriptsNameFilesRelativeToTheirDirectory) {
  const std::string gp = LatencyThroughputScript("a.dat", "a.png", "t'x", 5, 99);
  EXPECT_NE(gp.find("set terminal pngcairo"), std::string::npos);
  EXPECT_NE(gp.find("set output 'a.png'"), std::string::npos);
  EXPECT_NE(gp.find("'a.dat' using 1:5"), std::string::npos);
  EXPECT_NE(gp.find("'SLO: p99 <= 5 ms'"), std::string::npos);
  EXPECT_NE(gp.find("'t''x: latency vs throughput"), std::string::npos);  // quote escaped
  EXPECT_EQ(LatencyThroughputScript("a.dat", "a.png", "t", 0, 99).find("SLO"), std::string::npos);
  EXPECT_NE(LatencyOverTimeScript("b.dat", "b.png", "t").find("set output 'b.png'"),
            std::string::npos);
}

TEST(PlotsTest, WithoutGnuplotTheScriptsAndDataStay) {
  PlotOptions o;
  o.dir = testing::TempDir() + "/plots/nested";
  o.gnuplot = "/nonexistent/gnuplot";
  PlotFiles files;
  const absl::Status s = WritePlots(TwoSteps(), o, &files);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  ASSERT_EQ(files.scripts.size(), 2u);
  EXPECT_TRUE(files.pngs.empty());
  const std::string dat = Read(o.dir + "/latency_over_time.dat");
  // An interval without answers has no latency: '?' (missing), not 0 on a log axis.
  EXPECT_NE(dat.find("0.500 0 100 0.21 0.8 0.9 0 1"), std::string::npos) << dat;
  EXPECT_NE(dat.find("1.500 0 0 ? ? ? 0 0"), std::string::npos) << dat;
  const std::string points = Read(o.dir + "/latency_vs_throughput.dat");
  EXPECT_NE(points.find("99.5 0 0.2 0.3 0.9 1.5 2 100 0"), std::string::npos) << points;
}

TEST(PlotsTest, BadDirectoryNamesTheFlag) {
  PlotOptions o;
  o.dir = "/proc/self/no/such";
  const absl::Status s = WritePlots(TwoSteps(), o, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("--plot_dir: ", 0), 0u) << s;
}

}  // namespace
}  // namespace rankd::loadtest
