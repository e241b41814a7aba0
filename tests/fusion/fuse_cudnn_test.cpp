// fuse-cudnn: conv+add+relu and conv+relu to cuDNN's fused kernels, for
// CUDA targets only. The graph-level cases run everywhere; running the
// fused model needs a CUDA device and is reported SKIPPED without one.
#include "ir/model.h"
#include "tests/support/checked_run.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "verify/inputs.h"

#include <catch2/catch.hpp>
#include <torch/cuda.h>

#include <sstream>

using namespace ptopt;

namespace {

// conv(x) then `tail`, which reads %y (the conv's result) and %r (a residual
// input of the conv's shape, [1, 8, 6, 6]).
test::ParsedGraph build(const std::string& tail) {
  return test::parseWithConstants(
      "graph(%x : Tensor, %r : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %b : Tensor = get_attr[\"conv.bias\"]\n"
      "  %c : Tensor = get_attr[\"chan\"]\n"
      "  %y : Tensor = aten::conv2d(%x, %w, %b, [1], [0], [1], 1)\n" +
          tail,
      {{"conv.weight", torch::randn({8, 3, 3, 3})}, {"conv.bias", torch::randn({8})}, {"chan", torch::randn({1, 8, 1, 1})}});
}

struct Fused {
  rewriters::RunReport report;
  rewriters::PassContext ctx;
  int64_t count(const std::string& c) const { return test::counter(report, "fuse-cudnn", c); }
  bool declined(const std::string& text) const {
    for (const auto& d : ctx.declines())
      if (d.find("fuse-cudnn") != std::string::npos && d.find(text) != std::string::npos) return true;
    return false;
  }
};

std::unique_ptr<Fused> fuse(ir::Graph& g, const std::string& target = "cuda") {
  auto f = std::make_unique<Fused>();
  f->ctx.targetDevice = target;
  f->ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({1, 3, 8, 8}), torch::randn({1, 8, 6, 6})};
  test::runPipeline(g, "shape-prop", &f->ctx);
  f->report = test::runChecked(g, "fuse-cudnn", &f->ctx);
  return f;
}

// Runs `m` on CUDA against `reference` on CUDA (TF32 off), or says SKIPPED.
void checkOnCuda(torch::jit::Module m, torch::jit::Module reference, const std::vector<c10::IValue>& cpuInputs) {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: running cuDNN's fused kernels needs a CUDA device (none here)");
    return;
  }
  at::globalContext().setAllowTF32CuDNN(false);
  m.to(at::kCUDA);
  reference.to(at::kCUDA);
  std::vector<c10::IValue> inputs;
  for (const auto& v : cpuInputs) inputs.push_back(v.isTensor() ? c10::IValue(v.toTensor().cuda()) : v);
  m.eval();
  reference.eval();
  const at::Tensor a = m.forward(inputs).toTensor().cpu(), b = reference.forward(inputs).toTensor().cpu();
  CHECK(torch::allclose(a, b, 1e-4, 1e-4));
}

// A fixture through -O1 for a CUDA target.
struct CudaO1 {
  ir::Model model;
  rewriters::RunReport report;
};
CudaO1 cudaO1(const test::Fixture& f) {
  CudaO1 r{test::importFixture(f), {}};
  rewriters::PassContext ctx;
  ctx.targetDevice = "cuda";
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  r.report = test::runPipeline(r.model.forward(), "-O1", &ctx);
  return r;
}

}  // namespace

TEST_CASE("fuse-cudnn turns resnet18's conv+add+relu and conv+relu into cuDNN's fused kernels") {
  auto [model, report] = cudaO1(test::fixture("resnet18_script"));
  // 8 residual adds (after fuse-add-relu: _add_relu_), the stem conv and
  // each block's first conv with its relu; the 3 downsample convs feed adds
  // as residuals and stay.
  CHECK(test::counter(report, "fuse-cudnn", "add-relu") == 8);
  CHECK(test::counter(report, "fuse-cudnn", "relu") == 9);
  const ir::Graph& g = model.forward();
  CHECK(test::countOps(g, "aten::cudnn_convolution_add_relu") == 8);
  CHECK(test::countOps(g, "aten::cudnn_convolution_relu") == 9);
  CHECK(test::countOps(g, "aten::conv2d") == 3);
  CHECK(test::countOps(g, "aten::_add_relu_") == 0);
  CHECK(test::countOps(g, "aten::batch_norm") == 0);
  // The saved model says that it needs CUDA, and loads anywhere.
  CHECK(ir::requiresCuda(model));
  torch::jit::Module exported = ir::exportModel(model);
  std::stringstream bytes;
  exported.save(bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  CHECK(reloaded.attr(ir::kRequiresCudaAttribute).toBool());
}

// Only the CUDA run: ctest reports a case that prints SKIPPED as skipped.
TEST_CASE("resnet18 with cuDNN's fused kernels matches the original on CUDA", "[cuda]") {
  const auto& f = test::fixture("resnet18_script");
  auto [model, report] = cudaO1(f);
  REQUIRE(test::countOps(model.forward(), "aten::cudnn_convolution_add_relu") == 8);
  checkOnCuda(ir::exportModel(model), torch::jit::load(f.path), verify::makeInputs(f.inputs, 1));
}

// A traced model keeps aten::_convolution for CUDA targets (canonicalize
// leaves its fixed cuDNN flags alone there): fuse-cudnn fuses that form.
TEST_CASE("fuse-cudnn fuses a traced resnet18's aten::_convolution, on CUDA too", "[cuda]") {
  const auto& f = test::fixture("resnet18_trace");
  auto [model, report] = cudaO1(f);
  CHECK(test::counter(report, "fuse-cudnn", "add-relu") == 8);
  CHECK(test::counter(report, "fuse-cudnn", "relu") == 9);
  CHECK(test::countOps(model.forward(), "aten::cudnn_convolution_add_relu") == 8);
  CHECK(test::countOps(model.forward(), "aten::cudnn_convolution_relu") == 9);
  // The three downsample convs and nothing else stay unfused.
  CHECK(test::countOps(model.forward(), "aten::_convolution") == 3);
  // The reference is the scripted resnet18 (the same weights): the traced
  // one's _convolution fixes allow_tf32=True in the graph, so on an Ampere or
  // later GPU it runs its convs in TF32 whatever checkOnCuda asks (seen on an
  // H200: outside 1e-4), while the fused kernels follow the global flag.
  checkOnCuda(ir::exportModel(model), torch::jit::load(test::fixture("resnet18_script").path),
              verify::makeInputs(f.inputs, 1));
}

TEST_CASE("FuseCudnnDoesNotFireOnATracedConvWhoseFlagsTheFusedKernelWouldNotKeep") {
  // _convolution(input, weight, bias, stride, padding, dilation, transposed,
  //              output_padding, groups, benchmark, deterministic, cudnn_enabled, allow_tf32)
  auto traced = [](const std::string& flags) {
    return build("  %t : Tensor = aten::_convolution(%x, %w, %b, [1, 1], [0, 0], [1, 1], " + flags + ")\n"
                 "  %o : Tensor = aten::relu(%t)\n"
                 "  %u : Tuple[Tensor, Tensor] = prim::TupleConstruct(%o, %y)\n"
                 "  output(%u)\n");
  };
  auto plain = traced("False, [0, 0], 1, False, False, True, True");
  auto fp = fuse(*plain.graph);
  CHECK(fp->count("relu") == 1);  // the plain traced conv fuses; %y (a conv2d read twice) does not
  for (const auto& [flags, why] : std::vector<std::pair<std::string, std::string>>{
           {"False, [0, 0], 1, False, True, True, True", "deterministic"},
           {"False, [0, 0], 1, False, False, False, True", "cuDNN disabled"},
           {"False, [0, 0], 1, False, False, True, False", "forbids TF32"}}) {
    auto b = traced(flags);
    auto f = fuse(*b.graph);
    INFO(flags);
    CHECK(f->count("relu") == 0);
    CHECK(test::countOps(*b.graph, "aten::_convolution") == 1);
    CHECK(f->declined(why));
  }
}

TEST_CASE("FuseCudnnDoesNotFireForCpuTargets") {
  const auto& f = test::fixture("resnet18_script");
  ir::Model model = test::importFixture(f);
  rewriters::PassContext ctx;  // target cpu
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  auto report = test::runPipeline(model.forward(), "-O1", &ctx);
  CHECK(test::countOps(model.forward(), "aten::cudnn_convolution_add_relu") == 0);
  CHECK(test::countOps(model.forward(), "aten::cudnn_convolution_relu") == 0);
  CHECK_FALSE(ir::requiresCuda(model));
  bool said = false;
  for (const auto& d : ctx.declines()) said = said || d.find("the target is cpu") != std::string::npos;
  CHECK(said);
}

TEST_CASE("fuse-cudnn: add(conv, z, alpha) keeps alpha, relu_ of a conv fuses, short int lists are expanded") {
  auto b = build(
      "  %s : Tensor = aten::add.Tensor(%y, %r, 2)\n"
      "  %o : Tensor = aten::relu(%s)\n"
      "  %y2 : Tensor = aten::conv2d(%x, %w, %b, [1], [0], [1], 1)\n"
      "  %o2 : Tensor = aten::relu_(%y2)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%o, %o2)\n"
      "  output(%t)\n");
  auto f = fuse(*b.graph);
  CHECK(f->count("add-relu") == 1);
  CHECK(f->count("relu") == 1);
  test::checkIR(b.graph->str(), R"(
    # CHECK: aten::cudnn_convolution_add_relu(%x, %w, %r, 2, %b, [1, 1], [0, 0], [1, 1], 1)
    # CHECK: aten::cudnn_convolution_relu(%x, %w, %b, [1, 1], [0, 0], [1, 1], 1)
    # CHECK-NOT: aten::conv2d
  )");
}

TEST_CASE("FuseCudnnDoesNotFireWhenTheConvResultIsReadElsewhere") {
  auto b = build(
      "  %s : Tensor = aten::add.Tensor(%y, %r, 1)\n"
      "  %o : Tensor = aten::relu(%s)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%o, %y)\n"
      "  output(%t)\n");
  auto f = fuse(*b.graph);
  CHECK(f->count("add-relu") == 0);
  CHECK(test::countOps(*b.graph, "aten::conv2d") == 1);
  CHECK(f->declined("the conv's result has another user"));
}

TEST_CASE("FuseCudnnDoesNotFireOnABroadcastResidual") {
  auto b = build(
      "  %s : Tensor = aten::add.Tensor(%y, %c, 1)\n"
      "  %o : Tensor = aten::relu(%s)\n"
      "  output(%o)\n");
  auto f = fuse(*b.graph);
  CHECK(f->count("add-relu") == 0);
  CHECK(f->declined("does not broadcast"));
}

TEST_CASE("FuseCudnnDoesNotFireWhenAlphaScalesTheConv") {
  auto b = build(
      "  %s : Tensor = aten::add.Tensor(%r, %y, 2)\n"
      "  %o : Tensor = aten::relu(%s)\n"
      "  output(%o)\n");
  auto f = fuse(*b.graph);
  CHECK(f->count("add-relu") == 0);
  CHECK(f->declined("alpha != 1"));
}

TEST_CASE("FuseCudnnDoesNotFireWhenTheInPlaceAddWritesTheResidual") {
  auto b = build(
      "  %s : Tensor = aten::add_.Tensor(%r, %y, 1)\n"
      "  %o : Tensor = aten::relu_(%s)\n"
      "  %t : Tuple[Tensor, Tensor] = prim::TupleConstruct(%o, %r)\n"
      "  output(%t)\n");
  auto f = fuse(*b.graph);
  CHECK(f->count("add-relu") == 0);
  CHECK(f->declined("writes the residual"));
}
