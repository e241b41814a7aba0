// Module state: an attribute that forward assigns (prim::SetAttr, as in
// torchvision's AnchorGenerator) is imported as state, not frozen: reads and
// writes stay in place, the exported module carries the attribute, and
// repeated calls behave like the original's.
#include "ir/dead_code.h"
#include "ir/model.h"
#include "tests/support/pass_test.h"

#include <catch2/catch.hpp>

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
