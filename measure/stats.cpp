#include "measure/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace ptopt::measure {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) throw std::invalid_argument("percentile of no samples");
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (pos - static_cast<double>(lo)) * (samples[hi] - samples[lo]);
}

TimingStats summarize(const std::vector<double>& samplesMs) {
  TimingStats s;
  s.runs = samplesMs.size();
  if (samplesMs.empty()) return s;
  s.minMs = *std::min_element(samplesMs.begin(), samplesMs.end());
  s.medianMs = percentile(samplesMs, 0.5);
  s.p90Ms = percentile(samplesMs, 0.9);
  s.p99Ms = percentile(samplesMs, 0.99);
  s.meanMs = std::accumulate(samplesMs.begin(), samplesMs.end(), 0.0) / static_cast<double>(samplesMs.size());
  double var = 0;
  for (double x : samplesMs) var += (x - s.meanMs) * (x - s.meanMs);
  var /= static_cast<double>(std::max<size_t>(1, samplesMs.size() - 1));
  s.cv = s.meanMs > 0 ? std::sqrt(var) / s.meanMs : 0;
  return s;
}

RatioEstimate bootstrapMedianRatio(const std::vector<double>& a, const std::vector<double>& b, int resamples,
                                   uint64_t seed) {
  if (a.size() != b.size() || a.empty()) throw std::invalid_argument("bootstrap needs equal, non-empty series");
  RatioEstimate r;
  r.resamples = resamples;
  r.median = percentile(b, 0.5) / percentile(a, 0.5);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, a.size() - 1);
  std::vector<double> ratios, ra(a.size()), rb(b.size());
  ratios.reserve(static_cast<size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    for (size_t k = 0; k < a.size(); ++k) {
      const size_t j = pick(rng);  // pairs stay together: A and B ran back to back
      ra[k] = a[j];
      rb[k] = b[j];
    }
    ratios.push_back(percentile(rb, 0.5) / percentile(ra, 0.5));
  }
  r.low = percentile(ratios, 0.025);
  r.high = percentile(ratios, 0.975);
  return r;
}

}  // namespace ptopt::measure
