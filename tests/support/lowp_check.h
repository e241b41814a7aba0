// Low-precision numerics judged by what this CPU computes (docs/pytorch-worlds.md, "Tests on
// any CPU").
//
// A bf16 result passes verify's bf16 criterion (cosine >= 0.99, max error
// <= 1e-2 + 5e-2 * max|reference|) on a CPU with native bf16
// (quant::probeCpuBf16()). Without it, LibTorch's bf16 kernels are ATen's own
// (AVX2-only CPUs; matmuls round partial sums to bf16) and a deep net may
// miss that criterion with a correct graph; there the result passes when it
// meets the criterion or when it is no further from fp32 than
// kStockBf16Factor times stock LibTorch's own bf16 of the original model
// (CPU autocast to bf16, run on the same inputs on the same machine), both
// in max error and in 1 - cosine. A wrong cast or a lost weight is far
// beyond either.
#pragma once

#include "verify/compare.h"

#include <ATen/core/ivalue.h>

#include <functional>
#include <string>

namespace ptopt::test {

constexpr double kStockBf16Factor = 2.0;

struct LowpVerdict {
  bool passed = false;
  std::string summary;  // the comparison(s) behind the verdict
};

// `stockBf16` runs the original in stock LibTorch's bf16 (wrap the call in
// StockBf16Scope); it is called only when the plain criterion fails on a CPU
// without native bf16.
LowpVerdict judgeBf16(const c10::IValue& actual, const c10::IValue& reference,
                      const std::function<c10::IValue()>& stockBf16);

// CPU autocast to bf16 for the scope (LibTorch 1.13 and 2.x). Run a freshly
// loaded module in it: the JIT may keep a plan specialized under autocast.
class StockBf16Scope {
 public:
  StockBf16Scope();
  ~StockBf16Scope();
  StockBf16Scope(const StockBf16Scope&) = delete;
  StockBf16Scope& operator=(const StockBf16Scope&) = delete;

 private:
  bool wasEnabled_;
  c10::ScalarType wasDtype_;
};

}  // namespace ptopt::test
