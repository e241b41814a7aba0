// Activation observers for int8 post-training quantization, and the
// quantization parameters they give.
//
// minmax: the running min and max. histogram: min/max first, then a
// histogram of 2048 bins over that range (a second calibration run), and the
// clip range that minimizes the expected quantization error (rounding noise
// inside, clipping error outside), searched by moving either end inwards a
// bin at a time (the idea of torch.ao's HistogramObserver, written anew).
// percentile: the histogram, clipped at the `percentile` (e.g. 99.99) of
// |values| on each side.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace ptopt::quant {

enum class ObserverKind { MinMax, Histogram, Percentile };
ObserverKind parseObserverKind(const std::string& s);

struct QParams {
  double scale = 1.0;
  int64_t zeroPoint = 0;
};

// quint8 activations, per tensor, affine: [qmin, qmax] = [0, 255], or
// [0, 127] with reduceRange (fbgemm / x86 engines, whose kernels can
// overflow otherwise).
QParams activationQParams(double lo, double hi, bool reduceRange);

class Observer {
 public:
  static constexpr int kBins = 2048;
  // First calibration run: the range.
  void observeRange(const at::Tensor& t);
  // Second run (histogram / percentile only): the histogram over the range.
  void observeHistogram(const at::Tensor& t);
  bool seen() const { return seen_; }
  double min() const { return min_; }
  double max() const { return max_; }
  QParams qparams(ObserverKind kind, double percentile, bool reduceRange) const;

 private:
  bool seen_ = false;
  double min_ = 0, max_ = 0;
  std::vector<double> hist_;
};

// Per-channel symmetric int8 weights (axis 0): scale = max|w_c| / 127.5,
// zero point 0. Returns the quantized tensor (qint8).
at::Tensor quantizeWeightPerChannel(const at::Tensor& w);

// Signal-to-quantization-noise ratio in dB of `approx` against `ref`
// (+inf when equal).
double sqnrDb(const at::Tensor& ref, const at::Tensor& approx);

}  // namespace ptopt::quant
