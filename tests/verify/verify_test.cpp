// The verify library: metrics, tolerances, structure, inputs, the runner.
#include "tests/support/fixtures.h"
#include "api/api.h"
#include "verify/compare.h"
#include "verify/fp64_reference.h"
#include "verify/inputs.h"
#include "verify/runner.h"
#include "rewriters/shape_prop.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/script.h>

using namespace ptopt;
using verify::Criterion;
using verify::Tolerance;

namespace {
c10::IValue tuple(std::vector<c10::IValue> v) { return c10::ivalue::Tuple::create(std::move(v)); }
}  // namespace

TEST_CASE("metrics of one output: max abs/rel, mismatch, cosine, worst element, histogram") {
  at::Tensor expected = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2});
  at::Tensor actual = expected.clone();
  actual[1][0] = 3.5f;  // off by 0.5
  auto c = verify::compareOutputs(actual, expected);
  REQUIRE(c.leaves.size() == 1);
  const auto& l = c.leaves[0];
  CHECK(l.path == "out");
  CHECK_FALSE(l.passed());
  CHECK(l.maxAbs == Approx(0.5));
  CHECK(l.maxRel == Approx(0.5 / 3));
  CHECK(l.mismatchFraction == Approx(0.25));
  CHECK(l.worstIndex == std::vector<int64_t>{1, 0});
  CHECK(l.worstActual == Approx(3.5));
  CHECK(l.worstExpected == Approx(3.0));
  CHECK(l.cosine < 1.0);
  CHECK(l.top1Agreement.has_value());  // 2-D float: classifier-like
  CHECK(*l.top1Agreement == Approx(1.0));
  // Three exact elements, one in the (1e-1, 1] decade.
  CHECK(l.histogram == std::vector<std::pair<std::string, int64_t>>{{"0", 3}, {"<=1e0", 1}});
  const std::string report = c.failureReport();
  CHECK(report.find("worst       at [1, 0]: got 3.5, expected 3") != std::string::npos);
}

TEST_CASE("a tolerance within bounds passes, bitwise equality is recognized") {
  at::Tensor y = torch::randn({4, 10});
  CHECK(verify::compareOutputs(y.clone(), y).bitwiseEqual());
  at::Tensor x = y + 1e-7;
  auto c = verify::compareOutputs(x, y, Tolerance{1e-4, 1e-5});
  CHECK(c.withinTolerance());
  CHECK_FALSE(c.bitwiseEqual());
  CHECK_FALSE(verify::compareOutputs(x, y, Tolerance::elementwise(0, 0)).withinTolerance());
}

TEST_CASE("fp32: the scale term lets a near-zero element of a large-scale output carry the error of its scale") {
  // Logits of RMS 100 with one element near zero: an error of 1e-4 there is
  // 1e-6 of the output's scale (fp32 reassociation), but 1e3 times
  // atol + rtol*|b| for that element.
  at::Tensor y = torch::full({1, 100}, 100.0f);
  y[0][7] = 1e-3f;
  at::Tensor x = y.clone();
  x[0][7] = 1e-3f + 1e-4f;
  const Tolerance fp32 = Tolerance::forPrecision(c10::ScalarType::Float);
  CHECK(fp32.scaleTol == verify::kDefaultScaleTol);
  auto l = verify::compareOutputs(x, y, fp32).leaves[0];
  CHECK(l.passed());
  CHECK(l.scale == Approx(std::sqrt(99 * 1e4 / 100.0)).epsilon(1e-6));
  // |a-b| / (atol + rtol*|b| + scaleTol*rms) for the worst element.
  CHECK(l.errorToBound == Approx(1e-4 / (1e-5 + 1e-4 * 1e-3 + 1e-5 * l.scale)).epsilon(1e-3));
  CHECK(l.mismatchFraction == 0);
  // Named case: the same error fails the plain elementwise check (scale-tol 0).
  auto plain = verify::compareOutputs(x, y, Tolerance::elementwise(1e-4, 1e-5)).leaves[0];
  CHECK_FALSE(plain.passed());
  CHECK(plain.errorToBound > 1);
  CHECK(plain.mismatchFraction == Approx(0.01));
  // Named case: an error of 1e-2 of the scale on that element is a bug, and fails.
  x[0][7] = 1.0f;
  auto bug = verify::compareOutputs(x, y, fp32).leaves[0];
  CHECK_FALSE(bug.passed());
  CHECK(bug.errorToBound == Approx((1.0 - 1e-3) / (1e-5 + 1e-4 * 1e-3 + 1e-5 * bug.scale)).epsilon(1e-3));
  CHECK(bug.worstIndex == std::vector<int64_t>{0, 7});
  const std::string report = verify::compareOutputs(x, y, fp32).failureReport();
  CHECK(report.find("bound       |a-b| <= 1e-05 + 0.0001*|b| + 1e-05*99.4987 (scale term 0.000995)") !=
        std::string::npos);
  CHECK(report.find("err/bound   ") != std::string::npos);
  const auto j = verify::toJson(bug);
  CHECK(j["criterion"] == "scaled-elementwise");
  CHECK(j["scale_tol"].get<double>() == 1e-5);
  CHECK(j["rms_reference"].get<double>() == Approx(bug.scale));
  CHECK(j["error_to_bound"].get<double>() == Approx(bug.errorToBound));
  CHECK(fp32.str() == "rtol 0.0001, atol 1e-05, scale-tol 1e-05 x rms");
}

TEST_CASE("the scale is the RMS of the finite reference values: one outlier does not loosen the rest") {
  // max|b| = 1e4 but RMS ~ 100: an error of 1e-2 on a unit element would be
  // within 1e-5*max|b| = 0.1, but is 9x the bound 1e-5 + 1e-4 + 1e-5*rms.
  at::Tensor y = torch::ones({10000});
  y[0] = 1e4f;
  y[1] = INFINITY;  // non-finite reference values are left out of the scale
  at::Tensor x = y.clone();
  x[5] = 1.01f;
  auto l = verify::compareOutputs(x, y).leaves[0];
  CHECK(l.scale == Approx(std::sqrt((1e8 + 9998) / 10000.0)).epsilon(1e-6));
  CHECK_FALSE(l.passed());
  CHECK(verify::compareOutputs(x, y, Tolerance{1e-4, 1e-5, Criterion::Elementwise, 0.99, 1e-3}).withinTolerance());
}

TEST_CASE("an all-zero output keeps atol as its floor, the global criterion ignores the scale term") {
  at::Tensor y = torch::zeros({8});
  CHECK(verify::compareOutputs(y + 5e-6, y).withinTolerance());
  CHECK_FALSE(verify::compareOutputs(y + 2e-5, y).withinTolerance());
  const Tolerance bf16 = Tolerance::forPrecision(c10::ScalarType::BFloat16);
  CHECK(bf16.scaleTol == 0);
  at::Tensor z = torch::linspace(-10, 10, 100);
  auto l = verify::compareOutputs(z + 0.3, z, bf16).leaves[0];  // bound 1e-2 + 5e-2*10 = 0.51
  CHECK(l.passed());
  CHECK(l.errorToBound == Approx(0.3 / 0.51).epsilon(1e-3));
  CHECK(verify::toJson(l).count("scale_tol") == 0);
}

TEST_CASE("top-1 agreement counts rows whose argmax moved") {
  at::Tensor y = torch::tensor({{0.f, 1.f}, {1.f, 0.f}, {0.f, 1.f}, {1.f, 0.f}});
  at::Tensor x = y.clone();
  x[0][0] = 2.f;  // row 0 now picks class 0
  auto l = verify::compareOutputs(x, y).leaves[0];
  REQUIRE(l.top1Agreement);
  CHECK(*l.top1Agreement == Approx(0.75));
}

TEST_CASE("NaN and Inf newly introduced fail, NaN where the reference has NaN does not") {
  at::Tensor y = torch::tensor({1.f, NAN, 3.f});
  at::Tensor x = torch::tensor({1.f, NAN, 3.f});
  CHECK(verify::compareOutputs(x, y).withinTolerance());
  at::Tensor bad = torch::tensor({NAN, NAN, INFINITY});
  auto l = verify::compareOutputs(bad, y, Tolerance{1, 1}).leaves[0];
  CHECK(l.newNan == 1);
  CHECK(l.newInf == 1);
  CHECK_FALSE(l.passed());
}

TEST_CASE("the global criterion of low precision: cosine and max error relative to the output's range") {
  at::Tensor y = torch::linspace(-10, 10, 1000);
  at::Tensor x = y + 0.05 * torch::sin(y * 37);  // bf16-sized noise
  const Tolerance bf16 = Tolerance::forPrecision(c10::ScalarType::BFloat16);
  CHECK(bf16.criterion == Criterion::Global);
  auto l = verify::compareOutputs(x, y, bf16).leaves[0];
  CHECK(l.mismatchFraction > 0);  // elementwise some small values miss...
  CHECK(l.passed());              // ...but the network-level error is fine
  CHECK_FALSE(verify::compareOutputs(-x, y, bf16).leaves[0].passed());  // cosine -1
  CHECK(Tolerance::forPrecision(c10::ScalarType::Half).rtol == 1e-2);
  CHECK(Tolerance::forPrecision(c10::ScalarType::Float).criterion == Criterion::Elementwise);
}

TEST_CASE("outputs are compared by structure and named by path") {
  at::Tensor a = torch::ones({2}), b = torch::zeros({2});
  auto ok = verify::compareOutputs(tuple({a, tuple({a, b})}), tuple({a, tuple({a, b})}));
  CHECK(ok.leafNames() == std::vector<std::string>{"out0", "out1[0]", "out1[1]"});
  CHECK(ok.bitwiseEqual());

  auto sizes = verify::compareOutputs(tuple({a, b}), tuple({a, b, b}));
  CHECK_FALSE(sizes.withinTolerance());
  CHECK(sizes.summary().find("out: structure differs: 2 elements vs reference 3") != std::string::npos);

  c10::impl::GenericDict d1(c10::StringType::get(), c10::TensorType::get());
  c10::impl::GenericDict d2(c10::StringType::get(), c10::TensorType::get());
  d1.insert("logits", a);
  d1.insert("extra", a);
  d2.insert("logits", a);
  d2.insert("probs", a);
  auto dict = verify::compareOutputs(d1, d2);
  CHECK_FALSE(dict.withinTolerance());
  CHECK(dict.summary().find("out.probs: structure differs: key missing") != std::string::npos);

  auto kinds = verify::compareOutputs(a, tuple({a}));
  CHECK(kinds.summary().find("one side is a tensor, the other a Tuple") != std::string::npos);
  auto shape = verify::compareOutputs(torch::ones({2, 3}), torch::ones({3, 2}));
  CHECK(shape.summary().find("shape 2x3 vs reference 3x2") != std::string::npos);
}

TEST_CASE("per-output tolerances apply to the named output only") {
  at::Tensor y = torch::ones({3});
  at::Tensor x = y + 1e-3;
  verify::ToleranceSet tol{Tolerance{}, {}, {{"out1", 1e-2}}};
  auto c = verify::compareOutputs(tuple({y, x}), tuple({y, y}), tol);
  CHECK(c.withinTolerance());
  auto c2 = verify::compareOutputs(tuple({x, y}), tuple({y, y}), tol);
  CHECK_FALSE(c2.withinTolerance());
  CHECK(tol.unknownNames({"out0", "out1"}).empty());
  CHECK(tol.unknownNames({"out"}) == std::vector<std::string>{"out1"});
}

namespace {
// forward(x, y, scale: int = 2, bias: Optional[Tensor] = None), compiled by
// TorchScript's own frontend.
torch::jit::Module scaledModule() {
  torch::jit::Module m("Scaled");
  m.define(R"(
def forward(self, x: Tensor, y: Tensor, scale: int = 2, bias: Optional[Tensor] = None):
    out = x * scale + y
    if bias is not None:
        out = out + bias
    return out
)");
  return m;
}
}  // namespace

TEST_CASE("input specs: none parses and prints back") {
  auto none = verify::parseInputSpec("none");
  CHECK(none.kind == verify::InputSpec::Kind::None);
  CHECK(none.name.empty());
  auto named = verify::parseInputSpec("bias:none");
  CHECK(named.kind == verify::InputSpec::Kind::None);
  CHECK(named.name == "bias");
  CHECK(named.str() == "bias:none");
  CHECK(verify::parseInputSpec(named.str()).kind == verify::InputSpec::Kind::None);
  CHECK(verify::makeInputs({named}, 0)[0].isNone());
  CHECK(verify::inputSpecFromJson(nlohmann::json{{"type", "none"}}).kind == verify::InputSpec::Kind::None);
  // A shape is still a shape, and a scalar still needs a number.
  CHECK(verify::parseInputSpec("none:1,2").name == "none");
  CHECK_THROWS_WITH(verify::parseInputSpec("int:none"), Catch::Contains("not a finite number"));
}

TEST_CASE("inputs with defaults may be left out: the default is used") {
  torch::jit::Module m = scaledModule();
  ir::Model model = ir::importModule(m);
  const ir::Graph& g = model.forward();
  CHECK(verify::optionalInputNames(g) == std::vector<std::string>{"scale", "bias"});
  CHECK_FALSE(verify::inputDefault(*g.inputs()[1]));
  REQUIRE(verify::inputDefault(*g.inputs()[2]));
  CHECK(*verify::inputDefault(*g.inputs()[2]) == ir::Literal(int64_t{2}));
  CHECK(verify::inputDefault(*g.inputs()[3])->isNone());

  const auto x = verify::parseInputSpec("2,4"), y = verify::parseInputSpec("2,4");
  auto specs = verify::completeInputSpecs({x, y}, g, "2 given");
  REQUIRE(specs.size() == 4);
  CHECK(specs[2].kind == verify::InputSpec::Kind::Default);
  CHECK(specs[2].str() == "scale:default(2)");
  CHECK(specs[3].str() == "bias:default(None)");
  auto values = verify::makeInputs(specs, 0);
  CHECK(values[2].toInt() == 2);
  CHECK(values[3].isNone());
  // The stock module with the inputs left out computes the same.
  const auto stock = m.forward({values[0], values[1]}).toTensor();
  CHECK(at::equal(m.forward(values).toTensor(), stock));
  CHECK(at::allclose(stock, values[0].toTensor() * 2 + values[1].toTensor()));

  // A named spec skips to its input; the one it skips keeps its default.
  auto skip = verify::completeInputSpecs({x, y, verify::parseInputSpec("bias:2,4")}, g, "3 given");
  CHECK(skip[2].kind == verify::InputSpec::Kind::Default);
  CHECK(skip[3].kind == verify::InputSpec::Kind::Tensor);
  auto explicitNone = verify::completeInputSpecs({x, y, verify::parseInputSpec("int:3"), verify::parseInputSpec("none")}, g, "");
  CHECK(verify::makeInputs(explicitNone, 0)[2].toInt() == 3);
  CHECK(verify::makeInputs(explicitNone, 0)[3].isNone());

  // Not cases: a required input missing names the optional ones; None for a
  // plain Tensor; an unknown name; an input twice; too many.
  CHECK_THROWS_WITH(verify::completeInputSpecs({x}, g, "1 given"),
                    Catch::Equals("the model takes 4 input(s) (x, y, scale, bias); 1 given: missing y (optional "
                                  "inputs: scale, bias)"));
  CHECK_THROWS_WITH(verify::completeInputSpecs({verify::parseInputSpec("none")}, g, ""),
                    Catch::Contains("input 'x' is Tensor, not Optional: it cannot be None"));
  CHECK_THROWS_WITH(verify::completeInputSpecs({x, verify::parseInputSpec("z:2,4")}, g, ""),
                    Catch::Contains("names 'z', but the model has no input of that name"));
  CHECK_THROWS_WITH(verify::completeInputSpecs({x, verify::parseInputSpec("x:2,4")}, g, ""),
                    Catch::Contains("input 'x' is given twice"));
  CHECK_THROWS_WITH(verify::completeInputSpecs({x, y, x, x, x}, g, "5 given"), Catch::Contains("5 given (too many)"));
}

TEST_CASE("inputs from a file: a shorter tuple or a dict without a key take the defaults") {
  torch::jit::Module m = scaledModule();
  ir::Model model = ir::importModule(m);
  const ir::Graph& g = model.forward();
  const at::Tensor x = torch::randn({2, 4}), y = torch::randn({2, 4});
  verify::InputSet tuple2{{"", ""}, {x, y}};
  auto values = verify::completeInputValues(tuple2, g, "");
  REQUIRE(values.size() == 4);
  CHECK(values[2].toInt() == 2);
  CHECK(values[3].isNone());
  verify::InputSet dict{{"bias", "y", "x"}, {x, y, x}};  // by name, scale left out
  auto byName = verify::completeInputValues(dict, g, "");
  CHECK(at::equal(byName[0].toTensor(), x));
  CHECK(at::equal(byName[1].toTensor(), y));
  CHECK(byName[2].toInt() == 2);
  CHECK(at::equal(byName[3].toTensor(), x));
  verify::InputSet noY{{"x", "bias"}, {x, y}};
  CHECK_THROWS_WITH(verify::completeInputValues(noY, g, "the file holds 2 value(s)"),
                    Catch::Contains("the file holds 2 value(s): missing y (optional inputs: scale, bias)"));
}

TEST_CASE("shape-prop runs with None for an Optional input") {
  torch::jit::Module m = scaledModule();
  ir::Model model = ir::importModule(m);
  rewriters::PassContext ctx;
  ctx.exampleInputs = verify::makeInputs(
      verify::completeInputSpecs({verify::parseInputSpec("2,4"), verify::parseInputSpec("2,4")}, model.forward(), ""),
      0);
  CHECK_NOTHROW(rewriters::ShapePropPass().run(model.forward(), ctx));
  // The output's shape is known: the branch that adds the bias did not run.
  const ir::Value* out = model.forward().outputs()[0];
  REQUIRE(out->meta().shape);
  CHECK(*out->meta().shape == std::vector<int64_t>{2, 4});
}

TEST_CASE("input specs: integer range and parse errors") {
  auto spec = verify::parseInputSpec("ids:2,7:int64");
  std::vector<verify::InputSpec> specs{spec};
  verify::applyIntRange(specs, 5, 9);
  auto t = verify::makeInputs(specs, 3)[0].toTensor();
  CHECK(t.scalar_type() == at::kLong);
  CHECK(t.min().item<int64_t>() >= 5);
  CHECK(t.max().item<int64_t>() < 9);
  CHECK(verify::parseIntRange("0,10") == std::make_pair<int64_t, int64_t>(0, 10));
  CHECK_THROWS_WITH(verify::parseIntRange("10,0"), Catch::Contains("HI > LO"));
  CHECK_THROWS_WITH(verify::parseIntRange("a,b"), Catch::Contains("bad --int-range"));
  // The same seed gives the same inputs.
  CHECK(at::equal(verify::makeInputs(specs, 3)[0].toTensor(), t));
}

TEST_CASE("input shapes are inferred only when safe") {
  auto resnet = test::importFixture(test::fixture("resnet18_script"));
  auto inferred = verify::inferInputSpecs(resnet.forward());
  REQUIRE(inferred);
  CHECK(inferred->specs[0].shape == std::vector<int64_t>{1, 3, 224, 224});
  CHECK(inferred->assumption.find("aten::conv2d with 3 input channels") != std::string::npos);

  auto conv1d = test::importFixture(test::fixture("conv1d_bn"));
  auto c1 = verify::inferInputSpecs(conv1d.forward());
  REQUIRE(c1);
  CHECK(c1->specs[0].shape == std::vector<int64_t>{1, 4, 224});

  auto linear = test::importFixture(test::fixture("linear_bn1d"));
  auto lin = verify::inferInputSpecs(linear.forward());
  REQUIRE(lin);
  CHECK(lin->specs[0].shape == std::vector<int64_t>{1, 16});

  // Three inputs, one an int: nothing is assumed.
  CHECK_FALSE(verify::inferInputSpecs(test::importFixture(test::fixture("control_flow")).forward()));
  // Integer ids into an embedding: no safe shape.
  CHECK_FALSE(verify::inferInputSpecs(test::importFixture(test::fixture("embedding_int64")).forward()));
}

TEST_CASE("inputs saved from Python: torch.save tensor, tuple and dict, TorchScript holder") {
  const std::string dir = test::fixturesDir() + "/inputs/";
  auto tensor = verify::loadInputsFile(dir + "image_tensor.pt");
  REQUIRE(tensor.values.size() == 1);
  auto tuple1 = verify::loadInputsFile(dir + "image_tuple.pt");
  REQUIRE(tuple1.values.size() == 1);
  auto holder = verify::loadInputsFile(dir + "image_module.pt");
  REQUIRE(holder.names == std::vector<std::string>{"x"});
  CHECK(at::equal(tensor.values[0].toTensor(), tuple1.values[0].toTensor()));
  CHECK(at::equal(tensor.values[0].toTensor(), holder.values[0].toTensor()));
  CHECK(tensor.values[0].toTensor().sizes() == at::IntArrayRef{1, 3, 64, 64});
  // A dict is ordered by the model's input names.
  auto dict = verify::loadInputsFile(dir + "control_flow_dict.pt");
  CHECK(dict.names == std::vector<std::string>{"n", "y", "x"});
  auto ordered = verify::orderInputs(dict, {"x", "y", "n"});
  CHECK(ordered[2].toInt() == 3);
  CHECK(at::equal(ordered[0].toTensor(), dict.values[2].toTensor()));
  // A one-element list: LibTorch 2.x reads it; 1.13's unpickler lacks the
  // single-item APPEND opcode Python writes for it, and the error says what to save instead.
  try {
    auto list1 = verify::loadInputsFile(dir + "image_list1.pt");
    REQUIRE(list1.values.size() == 1);
    CHECK(at::equal(list1.values[0].toTensor(), tensor.values[0].toTensor()));
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Contains("save the tensor itself or a tuple"));
  }
  CHECK_THROWS_WITH(verify::loadInputsFile(dir + "missing.pt"), Catch::Contains("no such file"));
  CHECK_THROWS_WITH(verify::loadInputsFile(test::fixturesDir() + "/bad/not_a_zip.pt"), Catch::Contains("holds neither"));
}

TEST_CASE("the runner caches the reference, checks candidates, and names inputs that do not fit") {
  const auto& f = test::fixture("resnet18_script");
  auto opt = Optimizer::load(f.path);
  verify::InputSource source;
  source.specs = f.inputs;
  source.iterations = 2;
  verify::ReferenceRunner runner(opt.original().clone(), source, {}, c10::Device(c10::kCPU), {"x"});
  auto same = runner.check(opt.exportModule());
  CHECK(same.passed);
  CHECK(same.bitwiseEqual);
  CHECK(same.iterations.size() == 2);
  CHECK(same.verdict().find("passed, bitwise equal (2 seeded runs (seed 0) of 1,3,64,64 on cpu") == 0);
  opt.run("-O1");
  auto folded = runner.check(opt.exportModule());
  CHECK(folded.passed);
  CHECK_FALSE(folded.bitwiseEqual);
  CHECK(folded.toJson()["iterations"][0]["outputs"][0]["top1_agreement"].get<double>() == Approx(1.0));

  verify::InputSource wrong;
  wrong.specs = {verify::parseInputSpec("1,5,64,64")};
  CHECK_THROWS_WITH(verify::ReferenceRunner(opt.original().clone(), wrong, {}, c10::Device(c10::kCPU), {"x"}),
                    Catch::Contains("fails on the given inputs (x=1,5,64,64)"));
}

TEST_CASE("devices: auto picks CUDA only when present, cuda is refused without it", "[cuda]") {
  if (torch::cuda::is_available()) {
    CHECK(verify::resolveDevice("auto").is_cuda());
  } else {
    CHECK(verify::resolveDevice("auto").is_cpu());
    CHECK_THROWS_WITH(verify::resolveDevice("cuda"), Catch::Contains("CUDA is not available"));
  }
  CHECK_THROWS_WITH(verify::resolveDevice("tpu"), Catch::Contains("not a device name"));
}

// Only the CUDA run: ctest reports a case that prints SKIPPED as skipped,
// so nothing else is checked here.
TEST_CASE("verification runs on CUDA", "[cuda]") {
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: CUDA verification (no CUDA device here)");
    return;
  }
  const auto& f = test::fixture("resnet18_script");
  auto opt = Optimizer::load(f.path);
  // A model for CUDA (a CPU target's -O1 has aten::_add_relu, which has no
  // CUDA kernel: its verification on a GPU fails to run, as it should).
  rewriters::PassContext ctx;
  ctx.targetDevice = "cuda";
  ctx.exampleInputs = verify::makeInputs(f.inputs, 0);
  opt.run("-O1", &ctx);
  verify::InputSource source;
  source.specs = f.inputs;
  auto report = opt.verify(source, {}, "cuda");
  INFO(report.verdict());
  CHECK(report.passed);
  CHECK(report.device.rfind("cuda", 0) == 0);
}

namespace {
torch::jit::Module scriptModule(const std::string& name, const std::string& source) {
  torch::jit::Module m(name);
  m.define(source);
  m.eval();
  return m;
}
}  // namespace

TEST_CASE("the float64 reference: float64 throughout, float32 only where an op has no float64 kernel") {
  // quantize_per_tensor has no float64 kernel; zeros() makes a float32
  // tensor that meets the float64 ones.
  torch::jit::Module m = scriptModule("Mixed", R"(
def forward(self, x: Tensor):
    q = torch.quantize_per_tensor(x * 3.0, 0.05, 128, 13)  # torch.quint8
    return torch.dequantize(q) + torch.zeros(x.shape) + x / 3.0
)");
  verify::Fp64Reference ref(m, c10::Device(c10::kCPU));
  const at::Tensor x = at::randn({64});
  const at::Tensor y = ref.run({x}, 0).toTensor();
  CHECK(y.scalar_type() == at::kDouble);
  REQUIRE(ref.keptFp32().size() == 1);
  CHECK(ref.keptFp32()[0].find("aten::quantize_per_tensor") != std::string::npos);
  // The float64 division is exact where the float32 one rounds.
  const at::Tensor q = at::dequantize(at::quantize_per_tensor(x * 3.0, 0.05, 128, at::kQUInt8)).to(at::kDouble);
  CHECK(at::allclose(y, q + x.to(at::kDouble) / 3.0, 0, 1e-15));
}

TEST_CASE("a result the fp32 original cannot judge passes by the float64 reference, a wrong one still fails") {
  // (x + 1e4) - 1e4 rounds x to float32's grid at 1e4 (2^-10): the fp32
  // original is ~1e-4 from float64 relative to x, far beyond the fp32
  // criterion. A rewrite that rounds differently but no worse passes by the
  // float64 reference, and says so (x + 6000 rounds x to a grid half as
  // coarse); one with a wrong constant fails.
  auto model = [](const std::string& expr) {
    return scriptModule("Cancel", "def forward(self, x: Tensor):\n    return " + expr + "\n");
  };
  verify::InputSource source;
  source.specs = {verify::parseInputSpec("4096")};
  const verify::ToleranceSet tol{Tolerance::forPrecision(c10::ScalarType::Float), {}, {}};
  verify::ReferenceRunner runner(model("(x + 10000.0) - 10000.0"), source, tol, c10::Device(c10::kCPU));

  auto right = runner.check(model("(x + 6000.0) - 6000.0"));
  CHECK(right.passed);
  CHECK(right.decidedByFp64());
  REQUIRE(right.fp64);
  CHECK(right.fp64->amplification() > 100);
  CHECK(right.fp64->ms > 0);
  CHECK(right.verdict().find("passed against the float64 reference") == 0);
  CHECK(right.toJson()["reference"] == "fp64");
  REQUIRE(right.iterations.front().fp64);
  const auto& leaf = right.iterations.front().fp64->leaves.at(0);
  CHECK_FALSE(leaf.passedFp32);
  CHECK(leaf.exact);  // the rewrite ran in float64: (x + 6000) - 6000 is x there
  CHECK(leaf.rewriteRel <= verify::kFloat32UnitRoundoff);
  CHECK(leaf.resultRel <= verify::kFp32NoiseMargin * leaf.originalRel);

  auto wrong = runner.check(model("(x + 10000.0) - 9999.999"));
  CHECK_FALSE(wrong.passed);
  REQUIRE(wrong.fp64);
  CHECK(wrong.failureReport().find("out: FAIL OUT") != std::string::npos);

  // The exact result passes by the fp32 criterion: no float64 run.
  auto same = runner.check(model("(x + 10000.0) - 10000.0"));
  CHECK(same.passed);
  CHECK_FALSE(same.fp64);
  CHECK(same.toJson()["reference"] == "fp32");
}
