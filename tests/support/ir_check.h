// FileCheck-style checks on IR text (LibTorch's torch::jit::testing::FileCheck).
//
//   checkIR(printGraph(g), R"(
//     # CHECK: aten::conv2d
//     # CHECK-NOT: aten::batch_norm
//     # CHECK-NEXT: output
//   )");
#pragma once

#include <torch/csrc/jit/testing/file_check.h>

#include <string>

namespace ptopt::test {

inline void checkIR(const std::string& irText, const std::string& checks) {
  torch::jit::testing::FileCheck().run(checks, irText);
}

}  // namespace ptopt::test
