// What a quantize pass run measured: held-out cosine and top-1 agreement
// against fp32, and the SQNR of every quantized op (for the CLI's summary and
// --report). The pass leaves it on its context's side data
// (`ctx.reports.find<QuantizeReport>()`, rewriters/side_data.h). A light
// header: tools include it without the pass.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ptopt::quant {

struct QuantizeOpReport {
  std::string op;       // `%x.3 = aten::conv2d`
  std::string kind;     // conv2d, conv2d_relu, linear, add, add_relu, cat, linear_dynamic
  double sqnrDb = std::numeric_limits<double>::infinity();  // output vs fp32, held-out batches
  bool fp32 = false;    // kept in fp32 (fallback or fp32-ops)
  std::string why;      // fallback reason
};
struct QuantizeReport {
  bool ran = false;
  bool applied = false;
  std::string mode, observer, calibrationSource;
  std::string engine;  // the quantized engine and whether reduce_range is used
  bool syntheticCalibration = false;
  size_t calibrationBatches = 0, heldOutBatches = 0;
  int threads = 0;  // intra-op threads calibration and the accuracy guard ran at (1: PassEffects::computesFromData)
  double minCosine = 0;
  double cosine = 1;                   // worst output cosine on held-out batches
  std::optional<double> top1Agreement;  // 2-D outputs
  std::vector<QuantizeOpReport> ops;
  std::string declined;  // why nothing was applied
  std::string summary() const;  // a few lines for the console
};

}  // namespace ptopt::quant
