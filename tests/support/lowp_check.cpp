#include "tests/support/lowp_check.h"

#include "quant/cpu_capability.h"

#include <ATen/autocast_mode.h>
#include <fmt/format.h>
#include <torch/version.h>

namespace ptopt::test {

namespace {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool cpuAutocastEnabled() { return at::autocast::is_autocast_enabled(at::kCPU); }
void setCpuAutocast(bool on, c10::ScalarType dtype) {
  at::autocast::set_autocast_enabled(at::kCPU, on);
  at::autocast::set_autocast_dtype(at::kCPU, dtype);
}
c10::ScalarType cpuAutocastDtype() { return at::autocast::get_autocast_dtype(at::kCPU); }
#else
bool cpuAutocastEnabled() { return at::autocast::is_cpu_enabled(); }
void setCpuAutocast(bool on, c10::ScalarType dtype) {
  at::autocast::set_cpu_enabled(on);
  at::autocast::set_autocast_cpu_dtype(dtype);
}
c10::ScalarType cpuAutocastDtype() { return at::autocast::get_autocast_cpu_dtype(); }
#endif

}  // namespace

StockBf16Scope::StockBf16Scope() : wasEnabled_(cpuAutocastEnabled()), wasDtype_(cpuAutocastDtype()) {
  setCpuAutocast(true, c10::ScalarType::BFloat16);
}

StockBf16Scope::~StockBf16Scope() {
  setCpuAutocast(wasEnabled_, wasDtype_);
  at::autocast::clear_cache();
}

LowpVerdict judgeBf16(const c10::IValue& actual, const c10::IValue& reference,
                      const std::function<c10::IValue()>& stockBf16) {
  const auto tol = verify::Tolerance::forPrecision(c10::ScalarType::BFloat16);
  const verify::Comparison cmp = verify::compareOutputs(actual, reference, tol);
  if (cmp.withinTolerance()) return {true, cmp.summary()};
  const quant::CpuBf16Support cpu = quant::probeCpuBf16();
  if (cpu.native) return {false, cmp.summary() + "(native bf16: " + cpu.why + ")"};

  const verify::Comparison stock = verify::compareOutputs(stockBf16(), reference, tol);
  std::string summary = fmt::format("no native bf16 ({}): judged against stock LibTorch's bf16 (autocast), "
                                    "allowed {:g}x its max error and 1 - cosine\nptopt:\n{}stock:\n{}",
                                    cpu.why, kStockBf16Factor, cmp.summary(), stock.summary());
  if (stock.leaves.size() != cmp.leaves.size())
    return {false, summary + "(the stock run's outputs differ in structure)"};
  for (size_t i = 0; i < cmp.leaves.size(); ++i) {
    const auto& ours = cmp.leaves[i];
    const auto& theirs = stock.leaves[i];
    if (ours.passed()) continue;
    const bool ok = ours.structureOk && ours.newNan == 0 && ours.newInf == 0 &&
                    ours.maxAbs <= kStockBf16Factor * theirs.maxAbs + tol.atol &&
                    1 - ours.cosine <= kStockBf16Factor * (1 - theirs.cosine) + 1e-6;
    if (!ok) return {false, summary + "(" + ours.path + " is beyond the stock bound)"};
  }
  return {true, summary};
}

}  // namespace ptopt::test
