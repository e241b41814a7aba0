// Module state: an attribute that forward assigns (prim::SetAttr, as in
// torchvision's AnchorGenerator) is imported as state, not frozen: reads and
// writes stay in place, the exported module carries the attribute, and
// repeated calls behave like the original's.
#include "ir/dead_code.h"
#include "ir/model.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>
#include <torch/cuda.h>

#include <sstream>

using namespace ptopt;

namespace {

torch::jit::Module counterModule() {
  torch::jit::Module m("StateModel");
  m.register_attribute("count", c10::TensorType::get(), torch::zeros({1}));
  m.register_attribute("scales", c10::ListType::ofTensors(), c10::List<at::Tensor>({torch::ones({1})}));
  m.define(R"(
def bump(self):
    self.count = self.count + 1
    self.scales = [s * 2.0 for s in self.scales]

def forward(self, x):
    before = self.count
    self.bump()
    return x + before + self.count + self.scales[0]
)");
  return m;
}

}  // namespace

TEST_CASE("an attribute that forward assigns is imported as state and exported as an attribute") {
  torch::jit::Module original = counterModule();
  ir::Model model = ir::importModule(original);
  const ir::Graph& g = model.forward();
  size_t reads = 0, writes = 0;
  g.walk([&](ir::Node* n) {
    if (const std::string* path = ir::statePath(*n)) {
      (n->is("prim::GetAttr") ? reads : writes) += 1;
      CHECK((*path == "count" || *path == "scales"));
      CHECK(ir::hasSideEffects(n));
    }
  });
  CHECK(writes == 2);
  CHECK(reads >= 3);
  // Passes keep state reads and writes where they are.
  test::runPipeline(model.forward(), "-O1");
  size_t after = 0;
  model.forward().walk([&](ir::Node* n) { after += ir::statePath(*n) != nullptr; });
  CHECK(after == reads + writes);

  torch::jit::Module exported = ir::exportModel(model);
  const at::Tensor x = torch::randn({3});
  for (int call = 0; call < 3; ++call) {
    INFO("call " << call);
    const at::Tensor expected = original.forward({x}).toTensor();
    CHECK(torch::equal(exported.forward({x}).toTensor(), expected));
  }
  // Importing the original did not change it, and the export's state is its own.
  CHECK(exported.attr("count").toTensor().item<float>() == 3.0f);
}

namespace {

// torchvision's pooler in miniature: `scales` is None until forward sets it
// (Optional[List[float]]) and read back in the same call; `bias` has a
// default value. (Objects of TorchScript classes: tests/cli/detection_test.sh.)
torch::jit::Module lazyStateModule() {
  torch::jit::Module m("LazyStateModel");
  m.register_attribute("scales", c10::OptionalType::create(c10::ListType::ofFloats()), c10::IValue());
  m.define(R"(
def forward(self, x, bias: Optional[Tensor] = None):
    if self.scales is None:
        self.scales = [0.5, 0.25]
    scales = self.scales
    assert scales is not None
    y = x * scales[0] + scales[1]
    if bias is not None:
        y = y + bias
    return y
)");
  return m;
}

}  // namespace

TEST_CASE("lazily initialized Optional state, seen by later reads in the same run, argument defaults kept") {
  torch::jit::Module original = lazyStateModule();
  ir::Model model = ir::importModule(original);
  // The interpreter sees the write within one run: shape-prop runs it, and
  // would hit the assert if the read still gave the value at import.
  rewriters::PassContext ctx;
  ctx.exampleInputs = std::vector<c10::IValue>{torch::randn({2, 3}), c10::IValue()};
  test::runPipeline(model.forward(), "shape-prop", &ctx);
  const at::Tensor x = torch::randn({2, 3});
  CHECK(torch::allclose(test::runGraph(model.forward(), {x, c10::IValue()}).toTensor(), x * 0.5 + 0.25));
  // Each run starts from the state at import: the constant table is unchanged.
  CHECK(model.constants->at("scales").isNone());

  // The export declares the attribute with its Optional type, keeps the
  // default of `bias`, and survives a save and reload.
  torch::jit::Module exported = ir::exportModel(model);
  std::ostringstream bytes;
  exported.save(bytes);
  std::istringstream in(bytes.str());
  torch::jit::Module reloaded = torch::jit::load(in);
  const auto& args = reloaded.get_method("forward").function().getSchema().arguments();
  REQUIRE(args.size() == 3);
  REQUIRE(args[2].default_value());
  CHECK(args[2].default_value()->isNone());
  CHECK(torch::allclose(reloaded.forward({x}).toTensor(), original.forward({x}).toTensor()));
}

// Module::to moves tensors in place and exportModel shares the IR's tensors:
// moduleOnDevice must move a deep copy, or verifying or timing on a GPU moves
// the IR's constants and breaks every later run on the CPU (seen on an H200:
// --tune on CUDA, then "mat1 is on cpu, different from other tensors").
TEST_CASE("moduleOnDevice moves a copy: the IR and the caller's module stay where they are", "[cuda]") {
  const auto& f = test::fixture("resnet18_script");
  ir::Model model = test::importFixture(f);
  torch::jit::Module exported = ir::exportModel(model);
  // Where nothing has to move, the module itself.
  torch::jit::Module same = ir::moduleOnDevice(exported, c10::Device(c10::kCPU));
  CHECK(same._ivalue() == exported._ivalue());
  if (!torch::cuda::is_available()) {
    WARN("SKIPPED: moving a module to a GPU needs a CUDA device (none here)");
    return;
  }
  torch::jit::Module moved = ir::moduleOnDevice(exported, c10::Device(c10::kCUDA));
  for (const auto& p : moved.parameters()) CHECK(p.is_cuda());
  for (const auto& p : exported.parameters()) CHECK(p.device().is_cpu());
  // The IR still runs on the CPU.
  torch::jit::Module again = ir::exportModel(model);
  again.eval();
  torch::NoGradGuard noGrad;
  CHECK_NOTHROW(again.forward({torch::randn({1, 3, 64, 64})}));
}
