// cast: which ops run in low precision, where the casts go, dtype literals,
// fp16 range, keep-io, and numerics within the bf16 / fp16 criteria on every
// fixture; the edit log proven complete on every fixture
// (Instrumentation::checkEditLog). The bf16 outputs are saved for the
// Python reload check (python.reload_cast). bf16 numerics are judged by what this CPU computes
// (tests/support/lowp_check.h); fp16 is emulated (fp32 compute), the same on
// every CPU.
#include "quant/cast.h"
#include "quant/cpu_capability.h"
#include "verify/precision.h"
#include "quant/precision_policy.h"
#include "rewriters/constants.h"
#include "rewriters/pipeline.h"
#include "target/capabilities.h"
#include "target/kernel_probes.h"
#include "tests/support/ir_check.h"
#include "tests/support/lowp_check.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

using namespace ptopt;

namespace {

std::string castDir() { return test::exportedDir() + "_cast"; }

const char* kO1Bf16 = "-O1";  // the folds first, then cast (as in -O3)

struct CastRun {
  Optimizer opt;
  rewriters::RunReport report;
  rewriters::PassContext ctx;
  int64_t counter(const std::string& name) const { return test::counter(report, "cast", name); }
  bool declined(const std::string& text) const {
    for (const auto& d : ctx.declines())
      if (d.find(text) != std::string::npos) return true;
    return false;
  }
};

// Loads a fixture, runs -O1 and then `cast` (options in braces).
// `assumedIsa`: the CPU level the run assumes (--assume-isa; "": this CPU's).
CastRun runCast(const test::Fixture& f, const std::string& castOptions, const std::string& assumedIsa = "") {
  CastRun r{Optimizer::load(f.path), {}, {}};
  r.ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  r.ctx.assumedIsa = assumedIsa;
  r.opt.run(kO1Bf16, &r.ctx);
  r.report = r.opt.run("cast" + castOptions, &r.ctx);
  return r;
}

// Re-runs shape-prop on the result, so every value's metadata holds the
// dtype it really has now.
void annotate(CastRun& r) {
  rewriters::PassContext ctx;
  ctx.exampleInputs = r.ctx.exampleInputs;
  r.opt.run("shape-prop", &ctx);
}

// Nodes whose floating-point tensor inputs have more than one dtype
// (conversions excepted: mixing is their job; 0-dim tensors too, a traced
// Python scalar: they take no part in type promotion).
std::vector<std::string> mixedFloatInputs(const ir::Graph& g) {
  std::vector<std::string> out;
  g.walk([&](ir::Node* n) {
    if (!n->isCall() || n->is("aten::to") || n->is("aten::type_as") || n->is("prim::TupleConstruct")) return;
    std::set<c10::ScalarType> dtypes;
    for (const auto& a : n->args()) {
      if (!a.isValue() || !a.value()->meta().dtype || !at::isFloatingType(*a.value()->meta().dtype)) continue;
      if (a.value()->meta().shape && a.value()->meta().shape->empty()) continue;
      dtypes.insert(*a.value()->meta().dtype);
    }
    if (dtypes.size() > 1) out.push_back(rewriters::describeNode(n));
  });
  return out;
}

// Number of `op` nodes whose first result has dtype `dtype` (after annotate()).
size_t countWithDtype(const ir::Graph& g, const std::string& op, c10::ScalarType dtype) {
  size_t count = 0;
  g.walk([&](ir::Node* n) {
    count += n->isCall() && n->target() == op && n->numOutputs() && n->output()->meta().dtype == dtype;
  });
  return count;
}

// Dtype of the first input of every `op` node.
std::set<c10::ScalarType> inputDtypes(const ir::Graph& g, const std::string& op) {
  std::set<c10::ScalarType> out;
  g.walk([&](ir::Node* n) {
    if (n->isCall() && n->target() == op && n->argValue(0) && n->argValue(0)->meta().dtype)
      out.insert(*n->argValue(0)->meta().dtype);
  });
  return out;
}

size_t countCasts(const ir::Graph& g, c10::ScalarType to) {
  size_t count = 0;
  g.walk([&](ir::Node* n) {
    count += n->is("aten::to") && n->overload() == "dtype" && n->arg(1).isLiteral() &&
             n->arg(1).literal() == ir::Literal(to);
  });
  return count;
}

// The reference outputs: the original (eval semantics for the model traced
// in training mode, as in the -O1 test).
c10::IValue reference(const test::Fixture& f, const std::vector<c10::IValue>& inputs) {
  const std::string path =
      f.name == "train_mode_trace" ? test::fixture("train_mode_eval_reference").path : f.path;
  torch::jit::Module m = torch::jit::load(path);
  m.eval();
  return test::runForward(m, inputs);
}

struct NumericsCheck {
  bool passed = false;
  std::string summary;
};

// The optimized model against the original under verify's criterion for
// `dtype` (the one `ptopt` itself applies); bf16 as this CPU computes it
// (test::judgeBf16: on a CPU without native bf16, also against stock
// LibTorch's own bf16 of the original).
NumericsCheck checkNumerics(CastRun& r, const test::Fixture& f, c10::ScalarType dtype, uint64_t seed,
                            bool signatureChanged = false) {
  auto inputs = verify::makeInputs(f.inputs, seed);
  torch::jit::Module optimized = r.opt.exportModule();
  verify::LowPrecisionRun run{dtype, signatureChanged};
  auto actual = test::runForward(optimized, run.adaptInputs(verify::cloneInputs(inputs)));
  if (dtype == c10::ScalarType::BFloat16) {
    auto verdict = test::judgeBf16(actual, reference(f, inputs), [&] {
      test::StockBf16Scope stock;
      return reference(f, inputs);  // a freshly loaded original
    });
    return {verdict.passed, verdict.summary};
  }
  auto cmp = verify::compareOutputs(actual, reference(f, inputs), verify::Tolerance::forPrecision(dtype));
  return {cmp.withinTolerance(), cmp.summary()};
}

// bf16 `actual` of a rewritten graph against `expected` (the original
// graph's fp32 output); `original` is a copy of the graph before the pass,
// for the stock bf16 run.
test::LowpVerdict judgeGraphBf16(const c10::IValue& actual, const c10::IValue& expected, const ir::Graph& original,
                                 const std::vector<c10::IValue>& inputs) {
  return test::judgeBf16(actual, expected, [&] {
    test::StockBf16Scope stock;
    return test::runGraph(original, inputs);  // exported afresh
  });
}

}  // namespace

TEST_CASE("Preset -O3 is -O2 plus cast, bf16 on CPU and fp16 on CUDA unless bf16 is preferred") {
  const std::string o3 = rewriters::presetPipeline(3);
  CHECK(o3 == rewriters::presetPipelineBody(2) + ",cast{dtype=auto},fuse-cudnn");
  CHECK(quant::resolveCastDtype("auto", "cpu", false) == c10::ScalarType::BFloat16);
  CHECK(quant::resolveCastDtype("auto", "cuda", false) == c10::ScalarType::Half);
  CHECK(quant::resolveCastDtype("auto", "cuda", true) == c10::ScalarType::BFloat16);
  CHECK(quant::resolveCastDtype("fp16", "cpu", false) == c10::ScalarType::Half);

  rewriters::PassContext cpu, cuda, cudaBf16;
  cuda.targetDevice = cudaBf16.targetDevice = "cuda";
  cudaBf16.preferBf16 = true;
  const auto pipeline = parsePipelineOrPreset("-O3");
  {
    // On a CPU, what dtype=auto introduces follows the CPU (--assume-isa):
    // a value of each run's context, so two contexts assume each their own.
    rewriters::PassContext bf16Cpu, avx2Cpu;
    bf16Cpu.assumedIsa = "avx512_bf16";
    avx2Cpu.assumedIsa = "avx2";
    CHECK(verify::lowestPrecisionIntroduced(pipeline, ptopt::defaultRegistry(), bf16Cpu) == c10::ScalarType::BFloat16);
    CHECK_FALSE(verify::lowestPrecisionIntroduced(pipeline, ptopt::defaultRegistry(), avx2Cpu).has_value());
    CHECK(verify::lowestPrecisionIntroduced(pipeline, ptopt::defaultRegistry(), bf16Cpu) == c10::ScalarType::BFloat16);
    CHECK(verify::lowestPrecisionIntroduced(parsePipelineOrPreset("cast{dtype=bf16}"), ptopt::defaultRegistry(),
                                            avx2Cpu) == c10::ScalarType::BFloat16);
  }
  CHECK(verify::lowestPrecisionIntroduced(pipeline, ptopt::defaultRegistry(), cuda) == c10::ScalarType::Half);
  CHECK(verify::lowestPrecisionIntroduced(pipeline, ptopt::defaultRegistry(), cudaBf16) == c10::ScalarType::BFloat16);
  CHECK_FALSE(verify::lowestPrecisionIntroduced(parsePipelineOrPreset("-O1"), ptopt::defaultRegistry(), cpu).has_value());
  CHECK(verify::lowestPrecisionIntroduced(parsePipelineOrPreset("cast{dtype=fp16,emulate=true}"), ptopt::defaultRegistry(), cpu) ==
        c10::ScalarType::Half);
  const std::string emulated = rewriters::printPipeline(verify::withEmulatedPrecision(pipeline, ptopt::defaultRegistry()));
  CHECK(emulated == rewriters::presetPipelineBody(2) + ",cast{dtype=auto,emulate=true},fuse-cudnn");
}

TEST_CASE("cast runs resnet18's folded convs and its linear in bf16 with one cast in and one out") {
  const auto& f = test::fixture("resnet18_script");
  CastRun r = runCast(f, "{dtype=bf16}");
  CHECK(r.counter("lowered") == 21);  // 20 convs + fc
  CHECK(r.counter("weights") == 42);  // their weights and (folded) biases
  CHECK(r.counter("casts") == 2);     // the image in, the logits out
  CHECK(r.counter("split") == 8);     // _add_relu_ has no bf16 kernel
  const ir::Graph& g = r.opt.model().forward();
  CHECK(test::countOps(g, "aten::batch_norm") == 0);  // folded before the cast, in fp32
  for (const auto& [name, value] : r.opt.model().constants->entries())
    if (value.isTensor() && name.find("_bf16") != std::string::npos)
      CHECK(value.toTensor().scalar_type() == c10::ScalarType::BFloat16);
  annotate(r);
  CHECK(countWithDtype(g, "aten::conv2d", c10::ScalarType::BFloat16) == 20);
  CHECK(inputDtypes(g, "aten::linear") == std::set<c10::ScalarType>{c10::ScalarType::BFloat16});
  CHECK(g.outputs()[0]->meta().dtype == c10::ScalarType::Float);
  CHECK(mixedFloatInputs(g).empty());
  for (uint64_t seed : {0, 1}) {
    auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, seed);
    INFO(check.summary);
    CHECK(check.passed);
  }
}

TEST_CASE("cast keeps softmax and layer_norm of a transformer block in fp32") {
  const auto& f = test::fixture("transformer_block");
  CastRun r = runCast(f, "{dtype=bf16}");
  CHECK(r.counter("lowered") == 8);  // 6 linears, 2 matmuls
  CHECK(r.counter("fp32") == 3);     // 2 layer_norms, softmax
  const ir::Graph& g = r.opt.model().forward();
  // Down: ln1 output (shared by q, k, v: one cast), softmax output, ln2
  // output. Up: attention scores for softmax, the two residual branches.
  CHECK(countCasts(g, c10::ScalarType::BFloat16) == 3);
  CHECK(countCasts(g, c10::ScalarType::Float) == 3);
  CHECK(r.counter("casts") == 6);
  annotate(r);
  CHECK(inputDtypes(g, "aten::softmax") == std::set<c10::ScalarType>{c10::ScalarType::Float});
  CHECK(inputDtypes(g, "aten::layer_norm") == std::set<c10::ScalarType>{c10::ScalarType::Float});
  CHECK(countWithDtype(g, "aten::linear", c10::ScalarType::BFloat16) == 6);
  CHECK(countWithDtype(g, "aten::matmul", c10::ScalarType::BFloat16) == 2);
  CHECK(countWithDtype(g, "aten::gelu", c10::ScalarType::BFloat16) == 1);  // follows fc1
  CHECK(mixedFloatInputs(g).empty());
  auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 3);
  INFO(check.summary);
  CHECK(check.passed);
}

// GPT-2 (`c_attn(x).split(d, dim=2)`, scripted: aten::split) and LeViT
// (`qkv(x).view(...).split([key, key, value], dim=3)`, traced:
// split_with_sizes) split one linear's result into q, k and v. The pieces
// stay bf16: before, the whole result went up to fp32 for the split and each
// piece back down for its matmul (-O3 GPT-2: 99 casts, 51 now).
TEST_CASE("cast keeps the pieces of a split of a bf16 tensor in bf16, with no cast around the split") {
  for (const char* name : {"fused_qkv_script", "split_qkv_trace"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      CastRun r = runCast(f, "{dtype=bf16}");
      CHECK(r.counter("lowered") == 4);  // qkv, the two matmuls, proj
      CHECK(r.counter("lists-kept") == 1);
      const ir::Graph& g = r.opt.model().forward();
      // Down: the input for qkv, softmax's result. Up: the scores for
      // softmax, proj's result for the residual add.
      CHECK(countCasts(g, c10::ScalarType::BFloat16) == 2);
      CHECK(countCasts(g, c10::ScalarType::Float) == 2);
      annotate(r);
      const std::string split = std::string(name) == "fused_qkv_script" ? "aten::split" : "aten::split_with_sizes";
      CHECK(test::countOps(g, split) == 1);
      CHECK(inputDtypes(g, split) == std::set<c10::ScalarType>{c10::ScalarType::BFloat16});
      g.walk([](ir::Node* n) {
        if (!n->is("prim::ListUnpack")) return;
        for (const auto& out : n->outputs()) {
          CHECK(out->meta().dtype == c10::ScalarType::BFloat16);
          for (const auto& u : out->uses()) CHECK_FALSE(u.user->is("aten::to"));
        }
      });
      CHECK(mixedFloatInputs(g).empty());
      auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 1);
      INFO(check.summary);
      CHECK(check.passed);
    }
  }
}

// Where fp32 ops read the pieces (the matmuls kept fp32 here), one cast of
// the whole tensor before the split costs less than one per piece after it.
TEST_CASE("CastCastsASplitInputUpOnceWhenFp32OpsReadItsPieces") {
  const auto& f = test::fixture("fused_qkv_script");
  CastRun r = runCast(f, "{dtype=bf16,fp32-ops=matmul}");
  CHECK(r.counter("lowered") == 2);  // qkv, proj
  CHECK(r.counter("lists-kept") == 0);
  // Up: qkv's result before the split, proj's result for the residual add.
  // Down: the input for qkv, the attention's result for proj.
  CHECK(countCasts(r.opt.model().forward(), c10::ScalarType::Float) == 2);
  CHECK(countCasts(r.opt.model().forward(), c10::ScalarType::BFloat16) == 2);
  annotate(r);
  CHECK(inputDtypes(r.opt.model().forward(), "aten::split") == std::set<c10::ScalarType>{c10::ScalarType::Float});
  auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 2);
  INFO(check.summary);
  CHECK(check.passed);
}

// A list of pieces used whole (here by cat) is a container: the split's
// input goes back to fp32, as before.
TEST_CASE("CastKeepsASplitWhoseListIsNotOnlyUnpackedInFloat32") {
  auto p = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"fc.weight\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  %l : List[Tensor] = aten::split.Tensor(%y, 16, 1)\n"
      "  %c : Tensor = aten::cat(%l, 1)\n"
      "  output(%c)\n",
      {{"fc.weight", torch::randn({32, 32}) * 0.2}});
  const at::Tensor x = torch::randn({4, 32});
  const at::Tensor expected = test::runGraph(*p.graph, {x}).toTensor();
  const auto original = ir::cloneGraph(*p.graph, std::make_shared<ir::ConstantTable>(p.graph->constants()));
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{x};
  auto report = test::runPipeline(*p.graph, "shape-prop,cast{dtype=bf16}", &ctx);
  CHECK(test::counter(report, "cast", "lowered") == 1);
  CHECK(test::counter(report, "cast", "lists-kept") == 0);
  rewriters::PassContext annotateCtx;
  annotateCtx.exampleInputs = ctx.exampleInputs;
  test::runPipeline(*p.graph, "shape-prop", &annotateCtx);
  CHECK(inputDtypes(*p.graph, "aten::split") == std::set<c10::ScalarType>{c10::ScalarType::Float});
  auto verdict = judgeGraphBf16(test::runGraph(*p.graph, {x}), expected, *original, {x});
  INFO(verdict.summary);
  CHECK(verdict.passed);
}

TEST_CASE("fp32-ops and lowp-ops change the table for one run") {
  const auto& f = test::fixture("transformer_block");
  CastRun fp32Linear = runCast(f, "{dtype=bf16,fp32-ops=linear}");
  CHECK(fp32Linear.counter("lowered") == 2);  // the matmuls only
  CastRun lowSoftmax = runCast(f, "{dtype=bf16,lowp-ops=\"softmax\"}");
  CHECK(lowSoftmax.counter("lowered") == 8 + 1);
  annotate(lowSoftmax);
  CHECK(countWithDtype(lowSoftmax.opt.model().forward(), "aten::softmax", c10::ScalarType::BFloat16) == 1);
}

TEST_CASE("fp16 stores the weights in fp16 and casts at the same boundaries") {
  // fp16 convolutions and matmuls do not run on a CPU with LibTorch 1.13:
  // structure only here, numerics by emulation below.
  const auto& f = test::fixture("transformer_block");
  CastRun r = runCast(f, "{dtype=fp16}");
  CHECK(r.counter("lowered") == 8);
  const ir::Graph& g = r.opt.model().forward();
  CHECK(countCasts(g, c10::ScalarType::Half) == 3);
  CHECK(countCasts(g, c10::ScalarType::Float) == 3);
  size_t halfWeights = 0;
  for (const auto& [name, value] : r.opt.model().constants->entries()) {
    if (!value.isTensor()) continue;
    if (name.find("_fp16") != std::string::npos) {
      CHECK(value.toTensor().scalar_type() == c10::ScalarType::Half);
      ++halfWeights;
    } else {
      CHECK(value.toTensor().scalar_type() == c10::ScalarType::Float);  // layer_norm's stay fp32
    }
  }
  CHECK(halfWeights == 12);
  CHECK(verify::lowestPrecisionIn(r.opt.model()) == c10::ScalarType::Half);
}

TEST_CASE("integer inputs and embeddings stay untouched") {
  const auto& f = test::fixture("embedding_int64");
  CastRun r = runCast(f, "{dtype=bf16}");
  CHECK(r.counter("lowered") == 1);  // the linear; embedding is an fp32 op
  const ir::Graph& g = r.opt.model().forward();
  ir::Value* idx = g.inputs().at(0);
  for (const auto& u : idx->uses()) CHECK_FALSE(u.user->is("aten::to"));
  annotate(r);
  CHECK(idx->meta().dtype == c10::ScalarType::Long);
  CHECK(countWithDtype(g, "aten::embedding", c10::ScalarType::Float) == 1);
  CHECK(mixedFloatInputs(g).empty());
  auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 1);
  INFO(check.summary);
  CHECK(check.passed);
}

TEST_CASE("float32 dtype literals and factory ops follow the precision they are read in") {
  const auto& f = test::fixture("dtype_literals");
  CastRun r = runCast(f, "{dtype=bf16,min-channels=0}");  // its conv is small (4 -> 8 channels)
  CHECK(r.counter("lowered") == 2);
  // conv(x).to(float32) is gone before cast sees it (-O1's cleanup
  // canonicalize: a float32 value to float32 is a no-op); ones and zeros
  // (sized at run time) -> bfloat16. arange(8) and full([1, 8]) are
  // constants: -O1 folds them, and cast stores the folded tensors in bf16
  // like any weight.
  CHECK(r.counter("literals") == 2);
  const ir::Graph& g = r.opt.model().forward();
  test::checkIR(g.str(), R"(
    # CHECK: aten::conv2d
    # CHECK-NOT: aten::to.dtype(
    # CHECK: aten::ones(
    # CHECK-SAME: torch.bfloat16
    # CHECK: aten::linear
    # CHECK: aten::add.Tensor
    # CHECK-SAME: const.folded
    # CHECK-SAME: _bf16
    # CHECK: aten::mul.Tensor
    # CHECK-SAME: _bf16
    # CHECK: aten::zeros(
    # CHECK-SAME: torch.bfloat16
  )");
  CHECK(test::countOps(g, "aten::arange") == 0);
  CHECK(test::countOps(g, "aten::full") == 0);
  // The mask comes from a comparison: to(float32) of a bool stays float32.
  test::checkIR(g.str(), R"(
    # CHECK: aten::gt.Scalar
    # CHECK-NEXT: aten::to.dtype(
    # CHECK-SAME: torch.float32
  )");
  annotate(r);
  CHECK(mixedFloatInputs(g).empty());
  auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 2);
  INFO(check.summary);
  CHECK(check.passed);
}

TEST_CASE("a weight outside the fp16 range keeps its op in fp32 unless clamp=true") {
  const auto& f = test::fixture("fp16_range_weight");
  CastRun r = runCast(f, "{dtype=fp16,emulate=true}");
  CHECK(r.counter("lowered") == 1);
  CHECK(r.counter("out-of-range") == 1);
  CHECK(r.declined("outside the fp16 range"));
  auto check = checkNumerics(r, f, c10::ScalarType::Half, 0);
  INFO(check.summary);
  CHECK(check.passed);

  CastRun clamped = runCast(f, "{dtype=fp16,clamp=true}");
  CHECK(clamped.counter("lowered") == 2);
  CHECK(clamped.counter("clamped") == 1);
  for (const auto& [name, value] : clamped.opt.model().constants->entries())
    if (value.isTensor() && name.find("_fp16") != std::string::npos)
      CHECK(value.toTensor().abs().max().item<double>() <= quant::kFp16Max);

  // bf16 has fp32's range: nothing to report.
  CastRun bf16 = runCast(f, "{dtype=bf16}");
  CHECK(bf16.counter("lowered") == 2);
  CHECK(bf16.counter("out-of-range") == 0);
}

TEST_CASE("keep-io=false makes float32 inputs and outputs bf16") {
  const auto& f = test::fixture("transformer_block");
  CastRun r = runCast(f, "{dtype=bf16,keep-io=false}");
  CHECK(r.counter("io-changed") == 2);
  auto run = verify::lowPrecisionRun(parsePipelineOrPreset("cast{dtype=bf16,keep-io=false}"), ptopt::defaultRegistry(), r.ctx, r.report);
  REQUIRE(run);
  CHECK(run->signatureChanged);
  auto inputs = verify::makeInputs(f.inputs, 0);
  torch::jit::Module m = r.opt.exportModule();
  auto out = test::runForward(m, run->adaptInputs(inputs));
  CHECK(out.toTensor().scalar_type() == c10::ScalarType::BFloat16);
  auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, 0, /*signatureChanged=*/true);
  INFO(check.summary);
  CHECK(check.passed);
}

TEST_CASE("casts are memoized per value and dtype") {
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("a.weight", torch::randn({8, 8}));
  constants->set("b.weight", torch::randn({8, 8}));
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %wa : Tensor = get_attr[\"a.weight\"]\n"
      "  %wb : Tensor = get_attr[\"b.weight\"]\n"
      "  %ya : Tensor = aten::linear(%x, %wa, None)\n"
      "  %yb : Tensor = aten::linear(%x, %wb, None)\n"
      "  %s : Tensor = aten::add.Tensor(%ya, %yb, 1)\n"
      "  %p : Tensor = aten::softmax.int(%s, 1, None)\n"
      "  %q : Tensor = aten::log_softmax.int(%s, 1, None)\n"
      "  %o : Tensor = aten::add.Tensor(%p, %q, 1)\n"
      "  output(%o)\n",
      opts);
  auto x = torch::randn({2, 8});
  auto expected = test::runGraph(*g, {x}).toTensor();
  auto original = ir::cloneGraph(*g, std::make_shared<ir::ConstantTable>(g->constants()));  // cast erases weights
  auto report = test::runPipeline(*g, "cast{dtype=bf16}");
  CHECK(test::counter(report, "cast", "lowered") == 2);
  CHECK(test::counter(report, "cast", "casts") == 2);  // x down once, s up once
  test::checkIR(g->str(), R"(
    # CHECK: aten::to.dtype(%x, torch.bfloat16
    # CHECK: aten::linear
    # CHECK: aten::linear
    # CHECK: aten::add.Tensor
    # CHECK: aten::to.dtype(
    # CHECK-SAME: torch.float32
    # CHECK-NOT: aten::to.dtype
    # CHECK: output
  )");
  auto actual = test::runGraph(*g, {x}).toTensor();
  CHECK(actual.scalar_type() == c10::ScalarType::Float);
  auto verdict = judgeGraphBf16(actual, expected, *original, {x});
  INFO(verdict.summary);
  CHECK(verdict.passed);
}

TEST_CASE("CastDoesNotTouchFloat64OrIntegerGraphs") {
  auto constants = std::make_shared<ir::ConstantTable>();
  constants->set("w", torch::randn({4, 4}, torch::kDouble));
  ir::ParseOptions opts;
  opts.constants = constants;
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %i : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %y : Tensor = aten::linear(%x, %w, None)\n"
      "  %j : Tensor = aten::add.Tensor(%i, %i, 1)\n"
      "  output(%y, %j)\n",
      opts);
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 4}, torch::kDouble), torch::arange(4)};
  auto report = test::runPipeline(*g, "shape-prop,cast{dtype=bf16}", &ctx);
  CHECK(test::counter(report, "cast", "lowered") == 0);
  CHECK(test::counter(report, "cast", "casts") == 0);
  CHECK(test::countOps(*g, "aten::to") == 0);
  bool declined = false;
  for (const auto& d : ctx.declines()) declined = declined || d.find("float64, not float32") != std::string::npos;
  CHECK(declined);
}

TEST_CASE("every fixture: bf16 within the bf16 criterion, fp16 emulated within the fp16 criterion") {
  std::filesystem::create_directories(castDir());
  for (const auto& f : test::allFixtures()) {
    if (f.name == "train_mode_eval_reference") continue;
    DYNAMIC_SECTION(f.name) {
      CastRun bf16 = runCast(f, "{dtype=bf16}");
      annotate(bf16);
      INFO(bf16.opt.model().forward().str());
      CHECK(mixedFloatInputs(bf16.opt.model().forward()).empty());
      auto check = checkNumerics(bf16, f, c10::ScalarType::BFloat16, 5);
      INFO("bf16:\n" << check.summary);
      CHECK(check.passed);
      bf16.opt.save(castDir() + "/" + f.name + ".pt");

      CastRun fp16 = runCast(f, "{dtype=fp16,emulate=true}");
      auto emulated = checkNumerics(fp16, f, c10::ScalarType::Half, 5);
      INFO("fp16 emulated:\n" << emulated.summary);
      CHECK(emulated.passed);
    }
  }
}

TEST_CASE("bf16 on a CPU keeps small convs in fp32 unless min-channels says otherwise") {
  const auto& f = test::fixture("deep_stack_500");  // 8-channel convs
  CastRun r = runCast(f, "{dtype=bf16}");
  CHECK(r.counter("lowered") == 0);
  CHECK(r.declined("a small conv (8 -> 8 channels, below min-channels=17)"));
  CHECK(countCasts(r.opt.model().forward(), c10::ScalarType::BFloat16) == 0);

  CastRun forced = runCast(f, "{dtype=bf16,min-channels=0}");
  CHECK(forced.counter("lowered") == 500);
  auto check = checkNumerics(forced, f, c10::ScalarType::BFloat16, 0);
  INFO(check.summary);
  CHECK(check.passed);

  // fp16 (a CUDA precision) is not limited by default.
  CastRun fp16 = runCast(f, "{dtype=fp16,emulate=true}");
  CHECK(fp16.counter("lowered") == 500);
}

TEST_CASE("cast keeps the channels-last layout of the weights it converts") {
  const auto& f = test::fixture("resnet18_script");
  Optimizer opt = Optimizer::load(f.path);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1,channels-last{mode=on},cast{dtype=bf16}", &ctx);
  size_t convs = 0;
  opt.model().forward().walk([&](ir::Node* n) {
    if (!n->is("aten::conv2d")) return;
    ++convs;
    auto w = rewriters::constantTensor(n->argValue(1));
    REQUIRE(w);
    CHECK(w->scalar_type() == c10::ScalarType::BFloat16);
    CHECK(w->is_contiguous(at::MemoryFormat::ChannelsLast));
  });
  CHECK(convs == 20);
}

TEST_CASE("bf16 on a CPU keeps silu in fp32 where its bf16 kernel is slower (probed), unless lowp-ops says otherwise") {
  // LibTorch 1.13's bf16 silu is slower than fp32 silu with its two casts;
  // 2.15's is faster. The probe times it once here; the test follows it.
  const bool lowpSiluPays = target::cpuLowPrecisionSiluPays(c10::ScalarType::BFloat16);
  INFO("bf16 silu pays on this CPU and LibTorch: " << lowpSiluPays);
  // silu and silu_ (nn.SiLU(inplace=True) scripts to silu_): the in-place
  // one writes the conv's fresh result, so it can run on an fp32 copy.
  for (const std::string op : {"aten::silu", "aten::silu_"}) {
    for (const bool lowp : {false, true}) {
      DYNAMIC_SECTION(op << (lowp ? " lowp-ops=silu" : " default")) {
        auto p = test::parseWithConstants(
            "graph(%x : Tensor):\n"
            "  %wa : Tensor = get_attr[\"a.weight\"]\n"
            "  %wb : Tensor = get_attr[\"b.weight\"]\n"
            "  %y : Tensor = aten::conv2d(%x, %wa, None, [1, 1], [1, 1], [1, 1], 1)\n"
            "  %s : Tensor = " + op + "(%y)\n"
            "  %z : Tensor = aten::conv2d(%s, %wb, None, [1, 1], [1, 1], [1, 1], 1)\n"
            "  output(%z)\n",
            {{"a.weight", torch::randn({32, 32, 3, 3}) * 0.05}, {"b.weight", torch::randn({32, 32, 3, 3}) * 0.05}});
        const at::Tensor x = torch::randn({1, 32, 8, 8});
        const at::Tensor expected = test::runGraph(*p.graph, {x}).toTensor();
        const auto original =
            ir::cloneGraph(*p.graph, std::make_shared<ir::ConstantTable>(p.graph->constants()));
        rewriters::PassContext ctx;
        ctx.exampleInputs = std::vector<c10::IValue>{x};
        test::runPipeline(*p.graph, lowp ? "shape-prop,cast{dtype=bf16,lowp-ops=silu}" : "shape-prop,cast{dtype=bf16}", &ctx);
        rewriters::PassContext annotateCtx;
        annotateCtx.exampleInputs = ctx.exampleInputs;
        test::runPipeline(*p.graph, "shape-prop", &annotateCtx);
        CHECK(inputDtypes(*p.graph, op) ==
              std::set<c10::ScalarType>{lowp || lowpSiluPays ? c10::ScalarType::BFloat16 : c10::ScalarType::Float});
        CHECK(inputDtypes(*p.graph, "aten::conv2d") == std::set<c10::ScalarType>{c10::ScalarType::BFloat16});
        auto verdict = judgeGraphBf16(test::runGraph(*p.graph, {x}), expected, *original, {x});
        INFO(verdict.summary);
        CHECK(verdict.passed);
      }
    }
  }
}

TEST_CASE("cast reads the groups of _convolution at its own position when sizing a conv") {
  // groups is argument 8 of aten::_convolution (argument 6 is `transposed`):
  // a 4-group conv with weight [16, 8, 1, 1] takes 32 input channels.
  auto b = test::parseWithConstants(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"conv.weight\"]\n"
      "  %y : Tensor = aten::_convolution(%x, %w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 4, False, False, "
      "True, True)\n"
      "  output(%y)\n",
      {{"conv.weight", torch::randn({16, 8, 1, 1})}});
  rewriters::PassContext ctx;
  test::runPipeline(*b.graph, "cast{dtype=bf16,min-channels=33}", &ctx);
  bool sized = false;
  std::string all;
  for (const auto& d : ctx.declines()) {
    sized |= d.find("a small conv (32 -> 16 channels") != std::string::npos;
    all += d + "\n";
  }
  INFO(all);
  CHECK(sized);
}

TEST_CASE("cast logs every edit it makes on every fixture (the edit log self-check)") {
  // After -O2, cast as -O3 runs it (dtype=auto) and in every mode that edits
  // differently (bf16, fp16, fp16 clamped, emulated fp16, keep-io=false):
  // Instrumentation::checkEditLog rebuilds the IR text before the pass from
  // the log's diff and compares it with the real text, and checks that the
  // pass reports changed exactly when it logged edits.
  const auto& registry = defaultRegistry();
  rewriters::Instrumentation inst;
  inst.checkEditLog = true;
  size_t fired = 0, edits = 0;
  for (const auto& f : test::allFixtures()) {
    INFO(f.name);
    Optimizer opt = Optimizer::load(f.path);
    rewriters::PassContext prep;
    prep.exampleInputs = verify::makeInputs(f.inputs, 0);
    opt.run(rewriters::presetPipelineBody(2), &prep);  // -O3 up to its cast
    for (const char* pass : {"cast{dtype=auto}", "cast{dtype=bf16}", "cast{dtype=fp16}", "cast{dtype=fp16,clamp=true}",
                             "cast{dtype=fp16,emulate=true}", "cast{dtype=bf16,keep-io=false}"}) {
      INFO(pass);
      ir::Model model = opt.model().clone();
      rewriters::PassContext ctx;
      rewriters::PassManager pm(registry, rewriters::parsePipeline(pass, registry), inst);
      rewriters::RunReport report;
      CHECK_NOTHROW(report = pm.run(model, ctx));
      for (const auto& e : report.executions) {
        CHECK(e.changed == (e.edits != 0));
        fired += e.changed;
        edits += e.edits;
      }
    }
  }
  INFO("executions that changed a graph: " << fired << ", edits: " << edits);
  CHECK(fired >= 100);  // 146 on a CPU with native bf16 (dtype=auto fires), 129 capped to AVX2
}

TEST_CASE("cast{dtype=auto} decides by the target CPU's ISA: fp32 on avx2, bf16 on avx512_bf16 (--assume-isa)") {
  const auto& f = test::fixture("resnet18_script");
  {
    CastRun r = runCast(f, "{dtype=auto}", "avx2");
    CHECK(r.counter("lowered") == 0);
    CHECK(r.counter("casts") == 0);
    CHECK(r.declined("dtype=auto keeps the whole graph in fp32: this CPU has no native bf16 (assumed avx2"));
    CHECK_FALSE(verify::lowestPrecisionIn(r.opt.model()).has_value());
    rewriters::PassContext ctx;
    ctx.assumedIsa = "avx2";
    const auto note = verify::precisionNote(parsePipelineOrPreset("-O3"), ptopt::defaultRegistry(), ctx);
    REQUIRE(note);
    CHECK(note->find("fp32 kept") == 0);
    // An explicit dtype is not the CPU's business.
    CHECK(runCast(f, "{dtype=bf16}", "avx2").counter("lowered") == 21);
  }
  for (const char* isa : {"avx512_bf16", "amx"}) {
    CastRun r = runCast(f, "{dtype=auto}", isa);
    CHECK(r.counter("lowered") == 21);
    CHECK_FALSE(r.declined("keeps the whole graph in fp32"));
    CHECK(verify::lowestPrecisionIn(r.opt.model()) == c10::ScalarType::BFloat16);
    rewriters::PassContext ctx;
    ctx.assumedIsa = isa;
    CHECK(verify::precisionNote(parsePipelineOrPreset("-O3"), ptopt::defaultRegistry(), ctx)->find("bf16") == 0);
  }
  // avx512 without bf16 instructions: fp32 as well.
  CHECK(runCast(f, "{dtype=auto}", "avx512").counter("lowered") == 0);
  // Not a cast with dtype=auto: no note.
  rewriters::PassContext ctx;
  CHECK_FALSE(verify::precisionNote(parsePipelineOrPreset("-O2"), ptopt::defaultRegistry(), ctx).has_value());
}

// Transformers' default attention (scaled_dot_product_attention with a bool
// padding or causal mask, as BERT and GPT-2 trace in transformers 5): the
// mask is not data to lower and must not keep the attention in fp32.
TEST_CASE("cast lowers scaled_dot_product_attention beside its bool mask, which stays bool") {
  if (!ir::findSchema("aten::scaled_dot_product_attention", "")) {
    WARN("SKIPPED: this LibTorch has no aten::scaled_dot_product_attention (PyTorch 2.0 on)");
    return;
  }
  auto p = test::parseWithConstants(
      "graph(%x : Tensor, %mask : Tensor):\n"
      "  %wq : Tensor = get_attr[\"q.weight\"]\n"
      "  %wk : Tensor = get_attr[\"k.weight\"]\n"
      "  %wv : Tensor = get_attr[\"v.weight\"]\n"
      "  %q : Tensor = aten::linear(%x, %wq, None)\n"
      "  %k : Tensor = aten::linear(%x, %wk, None)\n"
      "  %v : Tensor = aten::linear(%x, %wv, None)\n"
      "  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %mask, 0., False, None, False)\n"
      "  output(%a)\n",
      {{"q.weight", torch::randn({32, 32}) * 0.2}, {"k.weight", torch::randn({32, 32}) * 0.2},
       {"v.weight", torch::randn({32, 32}) * 0.2}});
  const at::Tensor x = torch::randn({1, 2, 16, 32});
  const at::Tensor mask = torch::ones({1, 1, 16, 16}, torch::kBool).tril();
  const at::Tensor expected = test::runGraph(*p.graph, {x, mask}).toTensor();
  const auto original = ir::cloneGraph(*p.graph, std::make_shared<ir::ConstantTable>(p.graph->constants()));
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{x, mask};
  auto report = test::runPipeline(*p.graph, "shape-prop,cast{dtype=bf16}", &ctx);
  CHECK(test::counter(report, "cast", "lowered") == 4);  // the three linears and the attention
  rewriters::PassContext annotateCtx;
  annotateCtx.exampleInputs = ctx.exampleInputs;
  test::runPipeline(*p.graph, "shape-prop", &annotateCtx);
  CHECK(inputDtypes(*p.graph, "aten::scaled_dot_product_attention") ==
        std::set<c10::ScalarType>{c10::ScalarType::BFloat16});
  p.graph->walk([](ir::Node* n) {
    if (!n->is("aten::scaled_dot_product_attention")) return;
    for (size_t i : {1, 2}) CHECK(n->argValue(i)->meta().dtype == c10::ScalarType::BFloat16);  // key, value
    CHECK(n->argValue(3)->meta().dtype == c10::ScalarType::Bool);  // the mask, as it was
  });
  for (const auto& u : p.graph->inputs().at(1)->uses()) CHECK_FALSE(u.user->is("aten::to"));
  auto verdict = judgeGraphBf16(test::runGraph(*p.graph, {x, mask}), expected, *original, {x, mask});
  INFO(verdict.summary);
  CHECK(verdict.passed);
}

TEST_CASE("CastDoesNotLowerAnAttentionWithAFloat64Input") {
  if (!ir::findSchema("aten::scaled_dot_product_attention", "")) {
    WARN("SKIPPED: this LibTorch has no aten::scaled_dot_product_attention (PyTorch 2.0 on)");
    return;
  }
  auto p = test::parseWithConstants(
      "graph(%q : Tensor, %k : Tensor, %v : Tensor, %bias : Tensor):\n"
      "  %a : Tensor = aten::scaled_dot_product_attention(%q, %k, %v, %bias, 0., False, None, False)\n"
      "  output(%a)\n",
      {});
  const at::Tensor q = torch::randn({1, 2, 8, 16}, torch::kDouble);
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{q, q, q, torch::zeros({1, 1, 8, 8}, torch::kDouble)};
  auto report = test::runPipeline(*p.graph, "shape-prop,cast{dtype=bf16}", &ctx);
  CHECK(test::counter(report, "cast", "lowered") == 0);
  bool said = false;
  for (const auto& d : ctx.declines()) said = said || d.find("is float64, not float32") != std::string::npos;
  CHECK(said);
}

// torchvision's ViT: nn.MultiheadAttention's fast path
// (`_native_multi_head_attention`, need_weights=False) ran in fp32 at -O3,
// two thirds of vit_b_16's time. It is in ATen's CPU autocast list; its
// second result is an undefined tensor that no cast may read.
TEST_CASE("cast runs nn.MultiheadAttention's fast path in bf16 and leaves its undefined weights alone") {
  const auto& f = test::fixture("mha_fast_path");
  CastRun r = runCast(f, "{dtype=bf16}");
  annotate(r);
  const ir::Graph& g = r.opt.model().forward();
  size_t attentions = 0;
  g.walk([&](ir::Node* n) {
    if (!n->is("aten::_native_multi_head_attention")) return;
    ++attentions;
    // query, key, value, the in-projection's weight and bias, the out-projection's
    for (size_t i : {0, 1, 2, 5, 6, 7, 8}) CHECK(n->argValue(i)->meta().dtype == c10::ScalarType::BFloat16);
    for (const auto& u : n->output(1)->uses()) CHECK_FALSE(u.user->is("aten::to"));
    bool castBack = false;
    for (const auto& u : n->output(0)->uses()) castBack = castBack || u.user->is("aten::to");
    CHECK(castBack);  // the block returns it as float32
  });
  CHECK(attentions == 1);
  CHECK_FALSE(r.declined("_native_multi_head_attention"));
  CHECK(g.outputs()[0]->meta().dtype == c10::ScalarType::Float);
  for (uint64_t seed : {0, 1}) {
    auto check = checkNumerics(r, f, c10::ScalarType::BFloat16, seed);
    INFO(check.summary);
    CHECK(check.passed);
  }
}

TEST_CASE("cast lowers the fast-path attention's weights result with need_weights=True, not when it is unknown") {
  const std::string body =
      "  %wqkv : Tensor = get_attr[\"in_proj_weight\"]\n"
      "  %bqkv : Tensor = get_attr[\"in_proj_bias\"]\n"
      "  %wo : Tensor = get_attr[\"out_proj.weight\"]\n"
      "  %bo : Tensor = get_attr[\"out_proj.bias\"]\n"
      "  %o : Tensor, %w : Tensor = aten::_native_multi_head_attention(%x, %x, %x, 8, 2, %wqkv, %bqkv, %wo, %bo, "
      "None, NEED, True, None)\n"
      "  output(%o, %w)\n";
  const std::vector<std::pair<std::string, at::Tensor>> weights = {{"in_proj_weight", torch::randn({24, 8}) * 0.3},
                                                     {"in_proj_bias", torch::randn({24}) * 0.1},
                                                     {"out_proj.weight", torch::randn({8, 8}) * 0.3},
                                                     {"out_proj.bias", torch::randn({8}) * 0.1}};
  const at::Tensor x = torch::randn({1, 5, 8});
  auto graphWith = [&](const std::string& header, const std::string& needWeights) {
    std::string text = body;
    text.replace(text.find("NEED"), 4, needWeights);
    return test::parseWithConstants(header + text, weights);
  };
  SECTION("need_weights=True: both results are data, both cast back") {
    auto p = graphWith("graph(%x : Tensor):\n", "True");
    const auto original = ir::cloneGraph(*p.graph, std::make_shared<ir::ConstantTable>(p.graph->constants()));
    const c10::IValue expected = test::runGraph(*p.graph, {x});
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{x};
    auto report = test::runPipeline(*p.graph, "shape-prop,cast{dtype=bf16}", &ctx);
    CHECK(test::counter(report, "cast", "lowered") == 1);
    for (ir::Value* out : p.graph->outputs()) CHECK(out->node()->is("aten::to"));
    auto verdict = judgeGraphBf16(test::runGraph(*p.graph, {x}), expected, *original, {x});
    INFO(verdict.summary);
    CHECK(verdict.passed);
  }
  SECTION("need_weights from an input: declined, fp32") {
    auto p = graphWith("graph(%x : Tensor, %need : bool):\n", "%need");
    rewriters::PassContext ctx;
    ctx.exampleInputs = std::vector<c10::IValue>{x, false};
    auto report = test::runPipeline(*p.graph, "shape-prop,cast{dtype=bf16}", &ctx);
    CHECK(test::counter(report, "cast", "lowered") == 0);
    bool said = false;
    for (const auto& d : ctx.declines()) said = said || d.find("need_weights is computed at run time") != std::string::npos;
    CHECK(said);
  }
}

namespace {

// conv -> `op` of %y, the conv's result, and %s = sigmoid(gate) -> conv: a
// squeeze-excite's scaling when `op` multiplies them and the gate is
// [1, C, 1, 1]; cast to `dtype`.
struct GateRun {
  test::ParsedGraph p;
  rewriters::RunReport report;
  at::Tensor x, gate;
  c10::IValue expected;
  std::shared_ptr<ir::Graph> original;
};

GateRun castGatedConvs(const std::string& op, std::vector<int64_t> gateShape, const std::string& dtype) {
  GateRun r{test::parseWithConstants(
                "graph(%x : Tensor, %g : Tensor):\n"
                "  %w1 : Tensor = get_attr[\"c1.weight\"]\n"
                "  %w2 : Tensor = get_attr[\"c2.weight\"]\n"
                "  %y : Tensor = aten::conv2d(%x, %w1, None, [1, 1], [0, 0], [1, 1], 1)\n"
                "  %s : Tensor = aten::sigmoid(%g)\n"
                "  %z : Tensor = " + op + "\n"
                "  %o : Tensor = aten::conv2d(%z, %w2, None, [1, 1], [0, 0], [1, 1], 1)\n"
                "  output(%o)\n",
                {{"c1.weight", torch::randn({32, 32, 1, 1}) * 0.2}, {"c2.weight", torch::randn({32, 32, 1, 1}) * 0.2}}),
            {}, torch::randn({1, 32, 8, 8}), torch::randn(gateShape), {}, nullptr};
  r.expected = test::runGraph(*r.p.graph, {r.x, r.gate});
  r.original = ir::cloneGraph(*r.p.graph, std::make_shared<ir::ConstantTable>(r.p.graph->constants()));
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{r.x, r.gate};
  r.report = test::runPipeline(*r.p.graph, "shape-prop,cast{dtype=" + dtype + "}", &ctx);
  rewriters::PassContext annotateCtx;
  annotateCtx.exampleInputs = ctx.exampleInputs;
  if (dtype == "bf16") test::runPipeline(*r.p.graph, "shape-prop", &annotateCtx);
  return r;
}

}  // namespace

TEST_CASE("cast scales a bf16 tensor by its small float32 gate in bf16: the gate is cast down, not the tensor up") {
  GateRun r = castGatedConvs("aten::mul.Tensor(%y, %s)", {1, 32, 1, 1}, "bf16");
  CHECK(test::counter(r.report, "cast", "factors-lowered") == 1);
  CHECK(inputDtypes(*r.p.graph, "aten::mul") == std::set<c10::ScalarType>{c10::ScalarType::BFloat16});
  CHECK(mixedFloatInputs(*r.p.graph).empty());
  // One cast of the gate down, the input's down, the output's back up: no
  // cast of the conv's 32x8x8 result up and down again.
  CHECK(countCasts(*r.p.graph, c10::ScalarType::BFloat16) == 2);
  CHECK(countCasts(*r.p.graph, c10::ScalarType::Float) == 1);
  auto verdict = judgeGraphBf16(test::runGraph(*r.p.graph, {r.x, r.gate}), r.expected, *r.original, {r.x, r.gate});
  INFO(verdict.summary);
  CHECK(verdict.passed);
}

TEST_CASE("CastKeepsAnAddOfASmallFloat32OperandInFloat32") {
  // A mask added to scores (finfo.min) could round to -inf in bf16.
  GateRun r = castGatedConvs("aten::add.Tensor(%y, %s, 1)", {1, 32, 1, 1}, "bf16");
  CHECK(test::counter(r.report, "cast", "factors-lowered") == 0);
  CHECK(inputDtypes(*r.p.graph, "aten::add") == std::set<c10::ScalarType>{c10::ScalarType::Float});
}

TEST_CASE("CastKeepsAProductWithAFullSizeFloat32OperandInFloat32") {
  GateRun r = castGatedConvs("aten::mul.Tensor(%y, %s)", {1, 32, 8, 8}, "bf16");
  CHECK(test::counter(r.report, "cast", "factors-lowered") == 0);
  CHECK(inputDtypes(*r.p.graph, "aten::mul") == std::set<c10::ScalarType>{c10::ScalarType::Float});
}

TEST_CASE("CastKeepsASmallFloat32FactorOutOfFp16") {
  // fp16's range is narrower than float32's: a factor could overflow.
  GateRun r = castGatedConvs("aten::mul.Tensor(%y, %s)", {1, 32, 1, 1}, "fp16");
  CHECK(test::counter(r.report, "cast", "factors-lowered") == 0);
}
