// Module state: an attribute that forward assigns (prim::SetAttr, as in
// torchvision's AnchorGenerator) is imported as state, not frozen: reads and
// writes stay in place, the exported module carries the attribute, and
// repeated calls behave like the original's.
#include "ir/dead_code.h"
#include "ir/model.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

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

TEST_CASE("lazily initialized Optional state, seen by later reads in the same run; argument defaults kept") {
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
