#include "quant/observers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ptopt::quant {

ObserverKind parseObserverKind(const std::string& s) {
  if (s == "minmax") return ObserverKind::MinMax;
  if (s == "histogram") return ObserverKind::Histogram;
  if (s == "percentile") return ObserverKind::Percentile;
  throw std::invalid_argument("unknown observer '" + s + "' (minmax, histogram, percentile)");
}

QParams activationQParams(double lo, double hi, bool reduceRange) {
  const int64_t qmin = 0, qmax = reduceRange ? 127 : 255;
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  QParams q;
  q.scale = std::max((hi - lo) / static_cast<double>(qmax - qmin), 1e-8);
  // The engines keep scales in float32.
  q.scale = static_cast<double>(static_cast<float>(q.scale));
  q.zeroPoint = std::clamp<int64_t>(qmin - static_cast<int64_t>(std::lround(lo / q.scale)), qmin, qmax);
  return q;
}

void Observer::observeRange(const at::Tensor& t) {
  if (t.numel() == 0) return;
  auto mm = at::aminmax(t.detach().to(at::kFloat));
  const double lo = std::get<0>(mm).item<double>(), hi = std::get<1>(mm).item<double>();
  if (!seen_) { min_ = lo; max_ = hi; seen_ = true; return; }
  min_ = std::min(min_, lo);
  max_ = std::max(max_, hi);
}

void Observer::observeHistogram(const at::Tensor& t) {
  if (!seen_ || t.numel() == 0 || max_ <= min_) return;
  at::Tensor h = at::histc(t.detach().to(at::kFloat).reshape({-1}), kBins, min_, max_).to(at::kDouble).contiguous();
  if (hist_.empty()) hist_.assign(kBins, 0.0);
  const double* p = h.data_ptr<double>();
  for (int i = 0; i < kBins; ++i) hist_[i] += p[i];
}

namespace {

// Expected squared error of quantizing the histogram into [lo, hi] with
// `levels` levels: rounding noise (step^2/12 per value) inside, the distance
// to the nearest end outside.
double expectedError(const std::vector<double>& hist, double min, double width, double lo, double hi, int levels) {
  const double step = std::max((std::max(hi, 0.0) - std::min(lo, 0.0)) / levels, 1e-12);
  double err = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    if (hist[i] == 0) continue;
    const double c = min + (static_cast<double>(i) + 0.5) * width;
    double e = step * step / 12.0;
    if (c < lo) e += (lo - c) * (lo - c);
    else if (c > hi) e += (c - hi) * (c - hi);
    err += hist[i] * e;
  }
  return err;
}

}  // namespace

QParams Observer::qparams(ObserverKind kind, double percentile, bool reduceRange) const {
  if (!seen_) return activationQParams(0, 1, reduceRange);
  if (kind == ObserverKind::MinMax || hist_.empty() || max_ <= min_) return activationQParams(min_, max_, reduceRange);
  const int levels = reduceRange ? 127 : 255;
  // Coarser bins for the search (the error is a sum over bins).
  constexpr int kSearchBins = 256;
  std::vector<double> coarse(kSearchBins, 0.0);
  for (int i = 0; i < kBins; ++i) coarse[i * kSearchBins / kBins] += hist_[i];
  const double width = (max_ - min_) / kSearchBins;
  double total = 0;
  for (double c : coarse) total += c;
  if (kind == ObserverKind::Percentile) {
    const double tail = total * (1.0 - percentile / 100.0);
    int lo = 0, hi = kSearchBins;
    double below = 0, above = 0;
    // Only a side that holds values (a relu output has no negative tail to clip).
    while (lo < hi && below + coarse[lo] <= tail && min_ < 0) below += coarse[lo++];
    while (hi > lo && above + coarse[hi - 1] <= tail) above += coarse[--hi];
    return activationQParams(min_ + lo * width, min_ + hi * width, reduceRange);
  }
  int lo = 0, hi = kSearchBins;
  double best = expectedError(coarse, min_, width, min_, max_, levels);
  int bestLo = lo, bestHi = hi;
  double cumLo = 0, cumHi = 0;
  while (hi - lo > 1) {
    // Move the end whose next bin holds fewer values.
    if (cumLo + coarse[lo] < cumHi + coarse[hi - 1] && min_ < 0) cumLo += coarse[lo++];
    else cumHi += coarse[--hi];
    const double e = expectedError(coarse, min_, width, min_ + lo * width, min_ + hi * width, levels);
    if (e < best) { best = e; bestLo = lo; bestHi = hi; }
  }
  return activationQParams(min_ + bestLo * width, min_ + bestHi * width, reduceRange);
}

at::Tensor quantizeWeightPerChannel(const at::Tensor& w) {
  at::Tensor wf = w.detach().to(at::kFloat).contiguous();
  at::Tensor amax = wf.reshape({wf.size(0), -1}).abs().amax(1);
  at::Tensor scales = (amax / 127.5).clamp_min(1e-8).to(at::kDouble);
  at::Tensor zps = at::zeros({wf.size(0)}, at::kLong);
  return at::quantize_per_channel(wf, scales, zps, 0, at::kQInt8);
}

double sqnrDb(const at::Tensor& ref, const at::Tensor& approx) {
  at::Tensor r = ref.detach().to(at::kDouble), a = approx.detach().to(at::kDouble);
  const double signal = r.pow(2).sum().item<double>();
  const double noise = (r - a).pow(2).sum().item<double>();
  if (noise <= 0) return std::numeric_limits<double>::infinity();
  if (signal <= 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

}  // namespace ptopt::quant
