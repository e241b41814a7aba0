// Import shares tensor storage with the loaded module (issue 25: a big model
// is held once, not twice), except where sharing could leak a write between
// the original and the IR: constants the model writes in place, the running
// statistics of a norm that updates them (training not literal False), and
// views of part of a storage (copied compactly, so the output does not carry
// the rest).
#include "ir/model.h"

#include <catch2/catch.hpp>

using namespace ptopt::ir;

namespace {

const void* dataOf(const Model& model, const std::string& name) { return model.constants->tensor(name).data_ptr(); }
const void* dataOf(const torch::jit::Module& m, const std::string& name) {
  return m.attr(name).toTensor().data_ptr();
}

}  // namespace

TEST_CASE("import shares an unwritten weight with the module and copies a buffer forward writes in place") {
  torch::jit::Module m("Counter");
  m.register_parameter("w", torch::randn({4, 4}), false);
  m.register_buffer("count", torch::zeros({1}));
  m.define("def forward(self, x):\n  self.count.add_(1)\n  return x.mm(self.w) + self.count\n");
  const Model model = importModule(m);
  CHECK(dataOf(model, "w") == dataOf(m, "w"));          // shared: no copy of the weight
  CHECK(dataOf(model, "count") != dataOf(m, "count"));  // written by forward: its own copy
  // Running the original leaves the IR's copy as it was imported.
  m.forward({torch::ones({2, 4})});
  CHECK(m.attr("count").toTensor().item<float>() == 1.0f);
  CHECK(model.constants->tensor("count").item<float>() == 0.0f);
}

TEST_CASE("import gives a list that holds a written tensor the same copy (a scripted RNN's _flat_weights)") {
  torch::jit::Module m("Decays");
  m.register_parameter("w", torch::randn({4, 4}), false);
  m.register_parameter("v", torch::randn({4, 4}), false);
  c10::List<at::Tensor> flat;
  flat.push_back(m.attr("w").toTensor());
  flat.push_back(m.attr("v").toTensor());
  m.register_attribute("flat", c10::ListType::ofTensors(), flat);
  m.define("def forward(self, x):\n  self.w.mul_(0.5)\n  return x.mm(self.flat[0]) + x.mm(self.flat[1])\n");
  const Model model = importModule(m);
  REQUIRE(model.constants->contains("w"));
  CHECK(dataOf(model, "w") != dataOf(m, "w"));  // written: its own copy
  // The IR's list holds the IR's copy of w (so a write through either name
  // reaches the other), and the module's list is untouched.
  bool found = false;
  for (const auto& [name, value] : model.constants->entries()) {
    if (!value.isList()) continue;
    const auto list = value.toList();
    REQUIRE(list.size() == 2);
    found = true;
    CHECK(list.get(0).toTensor().data_ptr() == dataOf(model, "w"));
    CHECK(list.get(1).toTensor().data_ptr() == dataOf(m, "v"));
  }
  CHECK(found);
  CHECK(m.attr("flat").toTensorList().get(0).data_ptr() == dataOf(m, "w"));
  // Running the original changes neither the IR's w nor its list.
  const at::Tensor before = model.constants->tensor("w").clone();
  m.forward({torch::ones({2, 4})});
  CHECK(torch::equal(model.constants->tensor("w"), before));
}

TEST_CASE("import copies the running statistics of a BatchNorm that updates them, and shares them in eval") {
  auto module = [](bool training) {
    torch::jit::Module m("Norm");
    m.register_buffer("rm", torch::rand({3}));
    m.register_buffer("rv", torch::rand({3}) + 0.5);
    m.register_parameter("gamma", torch::rand({3}), false);
    m.define(std::string("def forward(self, x):\n  return torch.batch_norm(x, self.gamma, None, self.rm, self.rv, ") +
             (training ? "True" : "False") + ", 0.1, 1e-5, False)\n");
    return m;
  };
  SECTION("training=True (a trace made in training mode): the kernel writes rm and rv") {
    torch::jit::Module m = module(true);
    const Model model = importModule(m);
    CHECK(dataOf(model, "rm") != dataOf(m, "rm"));
    CHECK(dataOf(model, "rv") != dataOf(m, "rv"));
    CHECK(dataOf(model, "gamma") == dataOf(m, "gamma"));
    const at::Tensor before = model.constants->tensor("rm").clone();
    m.forward({torch::randn({5, 3})});  // updates the module's running mean
    CHECK_FALSE(m.attr("rm").toTensor().equal(before));
    CHECK(model.constants->tensor("rm").equal(before));
  }
  SECTION("training=False: nothing writes them, so they are shared (must not copy)") {
    torch::jit::Module m = module(false);
    const Model model = importModule(m);
    CHECK(dataOf(model, "rm") == dataOf(m, "rm"));
    CHECK(dataOf(model, "rv") == dataOf(m, "rv"));
  }
}

TEST_CASE("import copies a view of part of a storage compactly, and keeps one constant for a tensor under two names") {
  torch::jit::Module m("Views");
  const at::Tensor whole = torch::randn({100});
  m.register_buffer("head", whole.narrow(0, 0, 10));
  m.register_buffer("all", whole);
  m.register_buffer("again", whole);
  m.define("def forward(self, x):\n  return x + self.head.sum() + self.all.sum() + self.again.sum()\n");
  const Model model = importModule(m);
  const at::Tensor head = model.constants->tensor("head");
  CHECK(head.data_ptr() != whole.data_ptr());
  CHECK(head.storage().nbytes() == 10 * sizeof(float));
  CHECK(head.equal(whole.narrow(0, 0, 10)));
  CHECK(dataOf(model, "all") == whole.data_ptr());
  CHECK_FALSE(model.constants->contains("again"));  // the same tensor: one constant
}
