// PT2E's Q/DQ ops without Python (ir/qdq_ops.h): the schema is found, the
// interpreter's kernels compute what _decomposed.py defines, and a model
// exported to TorchScript (which runs them as their ATen ops) gives the same
// bits.
#include "ir/interpreter.h"
#include "ir/model.h"
#include "ir/qdq_ops.h"
#include "ir/text.h"

#include <catch2/catch.hpp>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/torch.h>

using namespace ptopt;

namespace qdq_test {

const char* kGraph =
    "graph(%x : Tensor):\n"
    "  %q : Tensor = quantized_decomposed::quantize_per_tensor(%x, 0.05, 3, 0, 255, torch.uint8)\n"
    "  %d : Tensor = quantized_decomposed::dequantize_per_tensor(%q, 0.05, 3, 0, 255, torch.uint8, None)\n"
    "  %w : Tensor = get_attr[\"w\"]\n"
    "  %s : Tensor = get_attr[\"s\"]\n"
    "  %z : Tensor = get_attr[\"z\"]\n"
    "  %wd : Tensor = quantized_decomposed::dequantize_per_channel(%w, %s, %z, 1, -128, 127, torch.int8, None)\n"
    "  output(%q, %d, %wd)\n";

// Python's definitions registered in this process (not in a C++ test).
bool registered() {
  return !torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString("quantized_decomposed::quantize_per_tensor")).empty();
}

ir::Model model() {
  ir::Model m;
  m.constants->set("w", torch::randint(-128, 128, {2, 4, 3, 3}, torch::kInt8));
  m.constants->set("s", torch::rand({4}) * 0.1 + 0.01);
  m.constants->set("z", torch::tensor({0, 1, -2, 3}, torch::kLong));
  ir::ParseOptions opts;
  opts.constants = m.constants;
  m.methods.emplace_back("forward", ir::parseGraph(kGraph, opts));
  return m;
}

}  // namespace qdq_test

TEST_CASE("PT2E's Q/DQ ops have their schema and kernels without Python") {
  if (qdq_test::registered()) return;
  CHECK(ir::findSchema("quantized_decomposed::dequantize_per_channel", "") != nullptr);
  CHECK(ir::findSchema("quantized_decomposed::quantize_per_channel", "") == nullptr);  // not one of the three
  ir::Model m = qdq_test::model();
  CHECK(ir::hasUnregisteredQdqOps(m));
  const at::Tensor x = torch::randn({2, 4, 3, 3}) * 4;
  const auto got = ir::Interpreter(m.forward()).run({x.clone()});
  const at::Tensor q = got.at(0).toTensor(), d = got.at(1).toTensor(), wd = got.at(2).toTensor();
  // What _decomposed.py computes.
  CHECK(q.scalar_type() == at::kByte);
  CHECK(torch::equal(q, torch::clamp(torch::round(x * (1.0 / 0.05)) + 3, 0, 255).to(at::kByte)));
  CHECK(torch::equal(d, (q.to(at::kFloat) - 3) * 0.05));
  const at::Tensor w = m.constants->tensor("w"), s = m.constants->tensor("s"), z = m.constants->tensor("z");
  CHECK(torch::allclose(wd, (w.to(at::kFloat) - z.view({1, 4, 1, 1})) * s.view({1, 4, 1, 1})));
  // TorchScript runs their ATen ops: the same bits.
  torch::jit::Module ts = ir::exportModel(m);
  const auto tuple = ts.forward({x.clone()}).toTupleRef().elements();
  CHECK(torch::equal(tuple.at(0).toTensor(), q));
  CHECK(torch::equal(tuple.at(1).toTensor(), d));
  CHECK(torch::equal(tuple.at(2).toTensor(), wd));
  // The model given keeps the Q/DQ ops.
  CHECK(ir::hasUnregisteredQdqOps(m));
}

TEST_CASE("a Q/DQ op whose scale is not a constant is not decomposed but named") {
  if (qdq_test::registered()) return;
  ir::Model m;
  m.methods.emplace_back("forward", ir::parseGraph(
      "graph(%x : Tensor, %scale : float):\n"
      "  %q : Tensor = quantized_decomposed::quantize_per_tensor(%x, %scale, 0, 0, 255, torch.uint8)\n"
      "  output(%q)\n"));
  CHECK_THROWS_WITH(ir::decomposeQdqOps(m), Catch::Contains("its scale is not a constant"));
}
