// Import/export fidelity on every fixture: lint-clean import, text round
// trip, bitwise-equal outputs from the exported module, in memory and after
// save + reload. The saved files feed the Python reload check
// (python.reload_exported).
#include "ir/lint.h"
#include "ir/model.h"
#include "ir/text.h"
#include "tests/support/fixtures.h"
#include "verify/compare.h"

#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include <filesystem>

using namespace ptopt;

TEST_CASE("every fixture round-trips bitwise through import and export") {
  std::filesystem::create_directories(test::exportedDir());
  for (const auto& f : test::allFixtures()) {
    DYNAMIC_SECTION(f.name) {
      torch::jit::Module original;
      ir::Model model = test::importFixture(f, &original);
      for (const auto& [name, g] : model.methods) {
        INFO("method " << name);
        ir::lintOrThrow(*g, f.name);
        // print -> parse -> print is identical
        ir::ParseOptions opts;
        opts.constants = model.constants;
        opts.namedTypes = g->namedTypes();
        const std::string text = ir::printGraph(*g);
        auto reparsed = ir::parseGraph(text, opts);
        CHECK(ir::printGraph(*reparsed) == text);
        CHECK(ir::lint(*reparsed).empty());
      }
      torch::jit::Module exported = ir::exportModel(model);
      const std::string path = test::exportedDir() + "/" + f.name + ".pt";
      ir::saveModuleAtomically(exported, path);
      torch::jit::Module reloaded = torch::jit::load(path);
      for (uint64_t seed : {1u, 2u}) {
        auto inputs = verify::makeInputs(f.inputs, seed);
        auto expected = test::runForward(original, inputs, seed);
        auto fromMemory = test::runForward(exported, inputs, seed);
        auto fromFile = test::runForward(reloaded, inputs, seed);
        auto c1 = verify::compareOutputs(fromMemory, expected);
        auto c2 = verify::compareOutputs(fromFile, expected);
        INFO(c1.summary() << c2.summary());
        CHECK(c1.bitwiseEqual());
        CHECK(c2.bitwiseEqual());
      }
    }
  }
}

TEST_CASE("constants are named by module path and survive a second import") {
  ir::Model model = test::importFixture(test::fixture("resnet18_script"));
  CHECK(model.constants->contains("conv1.weight"));
  CHECK(model.constants->contains("layer1.0.bn1.running_mean"));
  CHECK(model.constants->contains("fc.bias"));
  auto exported = ir::exportModel(model);
  ir::Model again = ir::importModule(exported);
  std::vector<std::string> first, second;
  for (const auto& [k, v] : model.constants->entries()) first.push_back(k);
  for (const auto& [k, v] : again.constants->entries()) second.push_back(k);
  CHECK(first == second);
  auto opSequence = [](const ir::Graph& g) {
    std::vector<std::string> ops;
    g.walk([&](ir::Node* n) { ops.push_back(n->qualifiedTarget()); });
    return ops;
  };
  CHECK(opSequence(again.forward()) == opSequence(model.forward()));
  // Flat by default: root buffers under their dotted names, so
  // state_dict() keys are the original's.
  std::set<std::string> buffers;
  for (const auto& b : exported.named_buffers(/*recurse=*/false)) buffers.insert(b.name);
  CHECK(buffers.count("layer1.0.bn1.running_mean") == 1);
  CHECK(exported.named_children().size() == 0);
  // Nested on request: a submodule tree, same names after a second import.
  ir::ExportOptions nestedOptions;
  nestedOptions.nestedAttributes = true;
  auto nested = ir::exportModel(model, nestedOptions);
  CHECK(nested.attr("layer1").toModule().attr("0").toModule().attr("bn1").toModule().hasattr("running_mean"));
  ir::Model fromNested = ir::importModule(nested);
  std::vector<std::string> third;
  for (const auto& [k, v] : fromNested.constants->entries()) third.push_back(k);
  CHECK(third == first);
  auto x = torch::randn({1, 3, 64, 64});
  torch::NoGradGuard noGrad;
  CHECK(torch::equal(nested.forward({x}).toTensor(), exported.forward({x}).toTensor()));
}

TEST_CASE("a root with many constants holds them in buckets, and the names survive") {
  ir::Model model = test::importFixture(test::fixture("resnet18_script"));
  ir::ExportOptions options;  // small limits, so that resnet18's ~100 constants fill several buckets
  options.maxRootConstants = 64;
  options.constantBucketSize = 16;
  REQUIRE(model.constants->entries().size() > 4 * options.constantBucketSize);
  torch::jit::Module bucketed = ir::exportModel(model, options);
  // The constants moved into ConstantBucket submodules of at most
  // constantBucketSize attributes; the root keeps only submodules.
  size_t buckets = 0, inBuckets = 0;
  for (const auto& child : bucketed.named_children()) {
    CHECK(child.name.rfind(ir::kConstantBucketPrefix, 0) == 0);
    CHECK(child.value.type()->name()->name() == ir::kConstantBucketClass);
    const size_t n = child.value.named_buffers(/*recurse=*/false).size();
    CHECK(n <= options.constantBucketSize);
    inBuckets += n;
    ++buckets;
  }
  CHECK(buckets > 4);
  CHECK(buckets == (inBuckets + options.constantBucketSize - 1) / options.constantBucketSize);
  CHECK(bucketed.named_buffers(/*recurse=*/false).size() == 0);
  std::set<std::string> keys;
  for (const auto& b : bucketed.named_buffers(/*recurse=*/true)) keys.insert(b.name);
  CHECK(keys.count(std::string(ir::kConstantBucketPrefix) + "0.bn1.bias") == 1);
  CHECK(keys.count("bn1.bias") == 0);
  // A second import drops the bucket names again, after a save and reload too.
  std::stringstream bytes;
  bucketed.save(bytes);
  torch::jit::Module reloaded = torch::jit::load(bytes);
  for (const torch::jit::Module* m : {&bucketed, &reloaded}) {
    ir::Model again = ir::importModule(*m);
    std::vector<std::string> first, second;
    for (const auto& [k, v] : model.constants->entries()) first.push_back(k);
    for (const auto& [k, v] : again.constants->entries()) second.push_back(k);
    CHECK(first == second);
  }
  torch::jit::Module flat = ir::exportModel(model);
  auto x = torch::randn({1, 3, 64, 64});
  torch::NoGradGuard noGrad;
  CHECK(torch::equal(reloaded.forward({x}).toTensor(), flat.forward({x}).toTensor()));
}

TEST_CASE("module state stays on the root when constants go to buckets") {
  torch::jit::Module m("Counter");
  m.register_attribute("count", c10::IntType::get(), int64_t{0});
  for (int i = 0; i < 5; ++i) m.register_buffer("w" + std::to_string(i), torch::full({2}, double(i)));
  m.define(R"(
def forward(self, x):
    self.count = self.count + 1
    return x * self.count + self.w0 + self.w1 + self.w2 + self.w3 + self.w4
)");
  ir::Model model = ir::importModule(m);
  ir::ExportOptions options;
  options.maxRootConstants = 2;
  torch::jit::Module exported = ir::exportModel(model, options);
  CHECK(exported.hasattr("count"));
  CHECK(exported.named_children().size() == 1);
  auto x = torch::ones({2});
  CHECK(torch::equal(exported.forward({x}).toTensor(), x + 10));
  CHECK(torch::equal(exported.forward({x}).toTensor(), x * 2 + 10));
  CHECK(exported.attr("count").toInt() == 2);
}

TEST_CASE("traced models get the same constant names as scripted ones") {
  ir::Model model = test::importFixture(test::fixture("resnet18_trace"));
  CHECK(model.constants->contains("layer4.1.conv2.weight"));
}

TEST_CASE("a weight shared by two convs stays one constant") {
  ir::Model model = test::importFixture(test::fixture("shared_weight_convs"));
  size_t convs = 0;
  ir::Value* weight = nullptr;
  bool shared = true;
  model.forward().walk([&](ir::Node* n) {
    if (!n->is("aten::conv2d")) return;
    ++convs;
    if (weight && weight != n->argValue(1)) shared = false;
    weight = n->argValue(1);
  });
  CHECK(convs == 2);
  CHECK(shared);
}

TEST_CASE("import freezes self.training branches in eval mode") {
  ir::Model model = test::importFixture(test::fixture("control_flow"));
  const std::string text = ir::printGraph(model.forward());
  CHECK(text.find("training") == std::string::npos);
  CHECK(text.find("prim::GetAttr") == std::string::npos);
}

TEST_CASE("import keeps the training-mode literals of a model traced in training mode") {
  ir::Model model = test::importFixture(test::fixture("train_mode_trace"));
  bool trainingBn = false, trainingDropout = false;
  model.forward().walk([&](ir::Node* n) {
    if (n->is("aten::batch_norm")) trainingBn = n->arg(5).literal().as<bool>();
    if (n->is("aten::dropout")) trainingDropout = n->arg(2).literal().as<bool>();
  });
  CHECK(trainingBn);
  CHECK(trainingDropout);
}

TEST_CASE("attributes a method assigns stay module state") {
  torch::jit::Module m("Counter");
  m.register_attribute("count", c10::IntType::get(), int64_t{0});
  m.define(R"(
def forward(self, x):
    self.count = self.count + 1
    return x * self.count
)");
  ir::Model model = ir::importModule(m);
  size_t setAttrs = 0;
  model.forward().walk([&](ir::Node* n) { setAttrs += n->isCall() && n->target() == "prim::SetAttr"; });
  CHECK(setAttrs == 1);
  auto exported = ir::exportModel(model);
  auto x = torch::ones({2});
  CHECK(torch::equal(exported.forward({x}).toTensor(), x));
  CHECK(torch::equal(exported.forward({x}).toTensor(), x * 2));
}

TEST_CASE("preserve-methods keeps extra methods frozen and exported") {
  torch::jit::Module m("Scaler");
  m.register_buffer("scale", torch::full({3}, 2.0));
  m.define(R"(
def forward(self, x):
    return x * self.scale

def double_scale(self, x):
    return self.forward(x) * 2.0
)");
  ir::ImportOptions opts;
  opts.preserveMethods = {"double_scale"};
  ir::Model model = ir::importModule(m, opts);
  REQUIRE(model.method("double_scale") != nullptr);
  CHECK(model.constants->size() == 1);
  auto exported = ir::exportModel(model);
  auto x = torch::randn({3});
  auto expected = m.get_method("double_scale")({x}).toTensor();
  auto actual = exported.get_method("double_scale")({x}).toTensor();
  CHECK(torch::equal(actual, expected));
  CHECK_THROWS_WITH(ir::importModule(m, ir::ImportOptions{{"nope"}}), Catch::Contains("no method 'nope'"));
}

TEST_CASE("loadTorchScript explains files that are not TorchScript") {
  const std::string bad = test::fixturesDir() + "/bad/";
  CHECK_THROWS_WITH(ir::loadTorchScript(bad + "state_dict.pt"), Catch::Contains("torch.save() checkpoint"));
  CHECK_THROWS_WITH(ir::loadTorchScript(bad + "not_a_zip.pt"), Catch::Contains("not a zip archive"));
  CHECK_THROWS_WITH(ir::loadTorchScript(bad + "legacy_pickle.pt"), Catch::Contains("legacy torch.save()"));
  CHECK_THROWS_WITH(ir::loadTorchScript(bad + "missing.pt"), Catch::Contains("No such file"));
  CHECK_THROWS_AS(ir::loadTorchScript(bad + "missing.pt"), ir::InputError);
}
