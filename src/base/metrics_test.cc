#include "base/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace dsh::metrics {
namespace {

using ::testing::HasSubstr;

TEST(Metrics, CounterRendersHelpTypeAndValue) {
  Registry r;
  Counter& c = r.AddCounter("dsh_things_total", "Things done.");
  c.Inc();
  c.Inc(41);
  EXPECT_EQ(r.Render(),
            "# HELP dsh_things_total Things done.\n"
            "# TYPE dsh_things_total counter\n"
            "dsh_things_total 42\n");
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  Registry r;
  auto& f = r.AddCounterFamily("dsh_x_total", "A \\ back\nslash.", {"route"});
  f.WithLabels({"a\"b\\c\nd"}).Inc(3);
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("# HELP dsh_x_total A \\\\ back\\nslash.\n"));
  EXPECT_THAT(text, HasSubstr("dsh_x_total{route=\"a\\\"b\\\\c\\nd\"} 3\n"));
}

TEST(Metrics, HistogramBucketsAreCumulativeEndInInfAndHaveSumAndCount) {
  Registry r;
  Histogram& h = r.AddHistogram("dsh_wait_seconds", "Waits.", {0.1, 1, 10});
  h.Observe(0.05);
  h.Observe(0.1);  // `le` is inclusive
  h.Observe(0.5);
  h.Observe(20);
  EXPECT_EQ(r.Render(),
            "# HELP dsh_wait_seconds Waits.\n"
            "# TYPE dsh_wait_seconds histogram\n"
            "dsh_wait_seconds_bucket{le=\"0.1\"} 2\n"
            "dsh_wait_seconds_bucket{le=\"1\"} 3\n"
            "dsh_wait_seconds_bucket{le=\"10\"} 3\n"
            "dsh_wait_seconds_bucket{le=\"+Inf\"} 4\n"
            "dsh_wait_seconds_sum 20.65\n"
            "dsh_wait_seconds_count 4\n");
}

TEST(Metrics, HistogramWithLabelsPutsLeLast) {
  Registry r;
  auto& f = r.AddHistogramFamily("dsh_calls_seconds", "Calls.", {"route"}, {1});
  f.WithLabels({"echo/echo"}).Observe(2);
  std::string text = r.Render();
  EXPECT_THAT(text, HasSubstr("dsh_calls_seconds_bucket{route=\"echo/echo\",le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("dsh_calls_seconds_bucket{route=\"echo/echo\",le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("dsh_calls_seconds_sum{route=\"echo/echo\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("dsh_calls_seconds_count{route=\"echo/echo\"} 1\n"));
}

TEST(Metrics, FamiliesInNameOrderAndSamplesInLabelOrder) {
  Registry r;
  auto& g = r.AddGaugeFamily("dsh_b", "B.", {"k"});
  g.WithLabels({"z"}).Set(1);
  g.WithLabels({"a"}).Set(-2.5);
  r.AddCounter("dsh_a_total", "A.");
  EXPECT_EQ(r.Render(),
            "# HELP dsh_a_total A.\n"
            "# TYPE dsh_a_total counter\n"
            "dsh_a_total 0\n"
            "# HELP dsh_b B.\n"
            "# TYPE dsh_b gauge\n"
            "dsh_b{k=\"a\"} -2.5\n"
            "dsh_b{k=\"z\"} 1\n");
}

TEST(Metrics, CallbackSamplesAreComputedAtRender) {
  Registry r;
  int calls = 0;
  r.AddCallback("dsh_live", "Live.", Type::kGauge, {"status"}, [&] {
    ++calls;
    return std::vector<Sample>{{{"running"}, 1}, {{"idle"}, static_cast<double>(calls)}};
  });
  r.Render();
  std::string text = r.Render();
  EXPECT_EQ(calls, 2);
  EXPECT_THAT(
      text,
      HasSubstr("# TYPE dsh_live gauge\ndsh_live{status=\"idle\"} 2\ndsh_live{status=\"running\"} 1\n"));
}

TEST(Metrics, AddingANameAgainReturnsTheSameMetric) {
  Registry r;
  Counter& a = r.AddCounter("dsh_n_total", "N.");
  Counter& b = r.AddCounter("dsh_n_total", "N.");
  EXPECT_EQ(&a, &b);
  Histogram& h1 = r.AddHistogram("dsh_h", "H.", {1, 2});
  Histogram& h2 = r.AddHistogram("dsh_h", "H.", {1, 2});
  EXPECT_EQ(&h1, &h2);
}

TEST(Metrics, ConcurrentIncrementsAreAllCounted) {
  Registry r;
  Counter& c = r.AddCounter("dsh_c_total", "C.");
  Histogram& h = r.AddHistogram("dsh_h_seconds", "H.", {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        c.Inc();
        h.Observe(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.value(), 40'000u);
  Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, 40'000u);
  EXPECT_EQ(s.cumulative[0], 0u);
  EXPECT_DOUBLE_EQ(s.sum, 40'000);
}

TEST(Metrics, FormatsValuesAsTheTextFormatWants) {
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-0.25), "-0.25");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");
  EXPECT_EQ(FormatValue(1e300), "1e+300");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(Metrics, BadNamesAreProgrammingErrors) {
  Registry r;
  EXPECT_DEATH(r.AddCounter("dsh-bad", "x"), "");
  EXPECT_DEATH(r.AddCounterFamily("dsh_ok_total", "x", {"le"}), "");
  r.AddCounter("dsh_t_total", "x");
  EXPECT_DEATH(r.AddGauge("dsh_t_total", "x"), "");
}

}  // namespace
}  // namespace dsh::metrics
