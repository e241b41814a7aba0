// Timing statistics of the measuring library (measure/): `ptopt bench`, the
// never-slower stage and the tuner read their samples through these:
// order statistics, spread, and a bootstrap confidence interval for the
// median ratio of two interleaved series. No LibTorch: plain numbers in,
// plain numbers out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ptopt::measure {

struct TimingStats {
  size_t runs = 0;
  double minMs = 0, medianMs = 0, meanMs = 0, p90Ms = 0, p99Ms = 0;
  double cv = 0;  // standard deviation / mean
};

// Linear-interpolated percentile (q in [0, 1]) of unsorted samples.
double percentile(std::vector<double> samples, double q);
TimingStats summarize(const std::vector<double>& samplesMs);

// A run whose coefficient of variation is above this is reported as noisy.
constexpr double kNoisyCv = 0.10;

struct RatioEstimate {
  double median = 0;          // median(b) / median(a)
  double low = 0, high = 0;   // 95% bootstrap interval
  int resamples = 0;
};
// Resamples the (a[i], b[i]) pairs with replacement `resamples` times
// (seeded, so a report is reproducible) and takes the 2.5% and 97.5%
// percentiles of median(b*)/median(a*).
RatioEstimate bootstrapMedianRatio(const std::vector<double>& a, const std::vector<double>& b, int resamples = 2000,
                                   uint64_t seed = 1);

}  // namespace ptopt::measure
