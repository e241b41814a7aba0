#include "tests/support/cpu_cap.h"

#include "quant/cpu_capability.h"

#include <ATen/Context.h>
#include <ATen/ATen.h>

#include <set>

namespace ptopt::test {

std::string followCpuCap() {
  const auto cap = quant::onednnIsaCap();
  // oneDNN's names for ISAs without AVX-512: where PyTorch on a real CPU of
  // that kind keeps bf16 away from oneDNN.
  static const std::set<std::string> noAvx512 = {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2"};
  if (!cap || !noAvx512.count(*cap) || !at::globalContext().userEnabledMkldnn()) return "";
  // Measured, not assumed: where PyTorch itself keeps bf16 convs off the
  // capped oneDNN (PyTorch 2.x asks oneDNN, which honours the cap; 1.13 with
  // cpuinfo capped too, scripts/avx2-cap.sh) the process already is an AVX2
  // one, and oneDNN stays on.
  try {
    const auto x = at::ones({1, 8, 6, 6}, at::kBFloat16), w = at::ones({8, 8, 3, 3}, at::kBFloat16);
    (void)at::conv2d(x, w);
    return "";
  } catch (const std::exception&) {
  }
  at::globalContext().setUserEnabledMkldnn(false);
  return "oneDNN capped to " + *cap +
         ": PyTorch's oneDNN use switched off, as PyTorch does for bf16 on a real CPU without AVX-512 "
         "(tests/support/cpu_cap.h)";
}

}  // namespace ptopt::test
