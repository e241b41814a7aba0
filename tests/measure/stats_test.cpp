// The measuring library's statistics (measure/stats.h).
#include "measure/stats.h"

#include <catch2/catch.hpp>

using namespace ptopt::measure;

TEST_CASE("order statistics and the coefficient of variation") {
  std::vector<double> x{5, 1, 4, 2, 3};
  CHECK(percentile(x, 0.5) == Approx(3));
  CHECK(percentile(x, 0.0) == Approx(1));
  CHECK(percentile(x, 1.0) == Approx(5));
  CHECK(percentile(x, 0.9) == Approx(4.6));
  auto s = summarize(x);
  CHECK(s.runs == 5);
  CHECK(s.minMs == 1);
  CHECK(s.medianMs == 3);
  CHECK(s.meanMs == Approx(3));
  CHECK(s.cv == Approx(std::sqrt(2.5) / 3));
  CHECK(summarize({2, 2, 2}).cv == 0);
  CHECK_THROWS(percentile({}, 0.5));
}

TEST_CASE("bootstrap interval of the median ratio brackets the true ratio") {
  std::vector<double> a, b;
  for (int i = 0; i < 200; ++i) {
    const double noise = 1 + 0.05 * std::sin(i * 1.7);
    a.push_back(10 * noise);
    b.push_back(8 * (1 + 0.05 * std::cos(i * 2.3)));
  }
  auto r = bootstrapMedianRatio(a, b, 1000, 7);
  CHECK(r.median == Approx(0.8).epsilon(0.02));
  CHECK(r.low <= r.median);
  CHECK(r.high >= r.median);
  CHECK(r.high < 1.0);  // B is clearly faster
  CHECK(r.high - r.low < 0.05);
  // Reproducible with the same seed.
  auto again = bootstrapMedianRatio(a, b, 1000, 7);
  CHECK(again.low == r.low);
  CHECK_THROWS(bootstrapMedianRatio({1, 2}, {1}));
}
