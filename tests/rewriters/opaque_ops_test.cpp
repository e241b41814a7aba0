// Opaque operators (ir/dead_code.h): operators outside aten:: and prim::,
// here registered by this test executable itself with TORCH_LIBRARY, are
// kept exactly through import, export and every generic pass: never folded,
// never merged, never removed unless declared pure; their alias annotations
// are trusted only when registered from the schema. Also: a model calling an
// operator nobody registered fails to load with a message that names it and
// suggests --load-ops, and ptopt::loadOperatorLibrary reports loader errors.
#include "ir/dead_code.h"
#include "ir/lint.h"
#include "ir/model.h"
#include "ir/text.h"
#include "tests/support/ir_check.h"
#include "tests/support/pass_test.h"
#include "api/api.h"
#include "api/load_ops.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/library.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <sstream>
#include <cstdio>
#include <unistd.h>

using namespace ptopt;

namespace {

std::atomic<int> opaqueCalls{0};

at::Tensor opaqueScale(const at::Tensor& x, double s) {
  ++opaqueCalls;
  return x * s;
}
at::Tensor& opaqueScaleInplace(at::Tensor& x, double s) {
  ++opaqueCalls;
  return x.mul_(s);
}
// Counts its calls (a side effect outside its schema); returns n + 1.
int64_t opaqueCount(int64_t n) {
  ++opaqueCalls;
  return n + 1;
}
at::Tensor conservativeTouch(const at::Tensor& x) { return x + 1; }

}  // namespace

TORCH_LIBRARY(ptopt_test, m) {
  m.def("opaque_scale(Tensor x, float s) -> Tensor", &opaqueScale);
  m.def("opaque_scale_(Tensor(a!) x, float s) -> Tensor(a!)", &opaqueScaleInplace);
  m.def("opaque_count(int n) -> int", &opaqueCount);
  m.def(torch::schema("pure_scale(Tensor x, float s) -> Tensor", c10::AliasAnalysisKind::PURE_FUNCTION),
        &opaqueScale);
  // CONSERVATIVE: the schema's (missing) annotations say nothing.
  m.def(torch::schema("conservative_touch(Tensor x) -> Tensor", c10::AliasAnalysisKind::CONSERVATIVE),
        &conservativeTouch);
}

namespace {

// A temporary file path that is removed at the end of the scope.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem)
      : path("/tmp/ptopt_opaque_" + stem + "_" + std::to_string(::getpid()) + ".pt") {}
  ~TempFile() { std::remove(path.c_str()); }
};

ir::Model modelOf(std::unique_ptr<ir::Graph> g) {
  ir::Model model;
  model.constants = g->sharedConstants();
  model.methods.emplace_back("forward", std::move(g));
  return model;
}

// IR text -> TorchScript file -> torch::jit::load -> ptopt import.
ir::Model throughTorchScript(const std::string& text, const std::string& stem, torch::jit::Module* loadedOut = nullptr) {
  ir::Model model = modelOf(ir::parseGraph(text));
  TempFile file(stem);
  ir::exportModel(model).save(file.path);
  torch::jit::Module loaded = ir::loadTorchScript(file.path);
  if (loadedOut) *loadedOut = loaded;
  return ir::importModule(loaded);
}

const ir::Node* findCall(const ir::Graph& g, const std::string& target) {
  const ir::Node* found = nullptr;
  g.walk([&](ir::Node* n) {
    if (!found && n->isCall() && n->target() == target) found = n;
  });
  return found;
}

// The text lines of the graph that call `target`.
std::vector<std::string> linesCalling(const ir::Graph& g, const std::string& target) {
  std::vector<std::string> lines;
  std::istringstream in(g.str());
  for (std::string line; std::getline(in, line);)
    if (line.find(target) != std::string::npos) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("an opaque operator is imported and exported with its schema, bitwise") {
  const std::string text =
      "graph(%x : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %b : Tensor = ptopt_test::opaque_scale(%a, 2.5)\n"
      "  %c : Tensor = aten::sigmoid(%b)\n"
      "  output(%c)\n";
  torch::jit::Module original;
  ir::Model model = throughTorchScript(text, "roundtrip", &original);
  const ir::Node* n = findCall(model.forward(), "ptopt_test::opaque_scale");
  REQUIRE(n != nullptr);
  CHECK(ir::isOpaque(n));
  REQUIRE(n->schema() != nullptr);
  CHECK(n->schema()->name() == "ptopt_test::opaque_scale");
  CHECK(n->arg(1).isLiteral());
  REQUIRE(n->arg(1).literal().is<double>());
  CHECK(n->arg(1).literal().as<double>() == 2.5);
  CHECK(ir::hasSideEffects(n));

  const at::Tensor x = torch::randn({2, 3});
  const int before = opaqueCalls.load();
  const at::Tensor expected = original.forward({x}).toTensor();
  const at::Tensor got = ir::exportModel(model).forward({x}).toTensor();
  CHECK(opaqueCalls.load() == before + 2);  // the operator really ran, once per model
  CHECK(torch::equal(expected, got));
}

TEST_CASE("import never evaluates an opaque operator, even with literal arguments") {
  // The argument is a module attribute, so TorchScript's own constant
  // propagation at load cannot fold the call, but ptopt's import resolves it
  // to the literal 3: aten:: operators on literals fold there; opaque_count
  // counts its calls, so it must stay.
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  opts.constants->set("n", c10::IValue(int64_t{3}));
  ir::Model source = modelOf(ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %n : int = get_attr[\"n\"]\n"
      "  %c : int = ptopt_test::opaque_count(%n)\n"
      "  %d : int = aten::add.int(%n, 5)\n"
      "  %e : int = aten::add.int(%c, %d)\n"
      "  output(%e)\n",
      opts));
  TempFile file("count");
  ir::exportModel(source).save(file.path);
  ir::Model model = ir::importModule(ir::loadTorchScript(file.path));
  const ir::Node* count = findCall(model.forward(), "ptopt_test::opaque_count");
  REQUIRE(count != nullptr);
  CHECK(count->arg(0).isLiteral());  // self.n became the literal 3 ...
  CHECK(test::countOps(model.forward(), "aten::add") == 1);  // ... and n + 5 was folded
}

TEST_CASE("dce keeps an unused opaque call unless its registration declares it pure") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %unused : Tensor = ptopt_test::opaque_scale(%x, 2.0)\n"
      "  %unusedPure : Tensor = ptopt_test::pure_scale(%x, 2.0)\n"
      "  %unusedAten : Tensor = aten::relu(%x)\n"
      "  output(%x)\n");
  auto r = test::runPipeline(*g, "dce");
  CHECK(test::counter(r, "dce", "removed") == 2);
  CHECK(test::countOps(*g, "ptopt_test::opaque_scale") == 1);
  CHECK(test::countOps(*g, "ptopt_test::pure_scale") == 0);
  CHECK(test::countOps(*g, "aten::relu") == 0);
}

TEST_CASE("cse never merges two calls of an opaque operator, and says why") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor = ptopt_test::opaque_scale(%x, 2.0)\n"
      "  %b : Tensor = ptopt_test::opaque_scale(%x, 2.0)\n"
      "  %p : Tensor = ptopt_test::pure_scale(%x, 2.0)\n"
      "  %q : Tensor = ptopt_test::pure_scale(%x, 2.0)\n"
      "  %r : Tensor = aten::relu(%x)\n"
      "  %s : Tensor = aten::relu(%x)\n"
      "  %ab : Tensor = aten::add.Tensor(%a, %b, 1)\n"
      "  %pq : Tensor = aten::add.Tensor(%p, %q, 1)\n"
      "  %rs : Tensor = aten::add.Tensor(%r, %s, 1)\n"
      "  %t1 : Tensor = aten::mul.Tensor(%ab, %pq)\n"
      "  %t : Tensor = aten::mul.Tensor(%t1, %rs)\n"
      "  output(%t)\n");
  rewriters::PassContext ctx;
  auto r = test::runPipeline(*g, "cse", &ctx);
  CHECK(test::counter(r, "cse", "eliminated") == 1);  // only the relus
  CHECK(test::countOps(*g, "ptopt_test::opaque_scale") == 2);
  CHECK(test::countOps(*g, "ptopt_test::pure_scale") == 2);
  bool explained = false;
  for (const auto& d : ctx.declines())
    explained = explained || d.find("opaque operator ptopt_test::opaque_scale") != std::string::npos;
  CHECK(explained);
}

TEST_CASE("const-fold never evaluates an opaque operator on constants, and says why") {
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  opts.constants->set("w", torch::ones({4}));
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %s : Tensor = ptopt_test::pure_scale(%w, 3.0)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %s, 1)\n"
      "  output(%y)\n",
      opts);
  const int before = opaqueCalls.load();
  rewriters::PassContext ctx;
  auto r = test::runPipeline(*g, "const-fold", &ctx);
  CHECK(test::counter(r, "const-fold", "folded") == 0);
  CHECK(opaqueCalls.load() == before);
  CHECK(test::countOps(*g, "ptopt_test::pure_scale") == 1);
  bool explained = false;
  for (const auto& d : ctx.declines()) explained = explained || d.find("opaque operator") != std::string::npos;
  CHECK(explained);
}

TEST_CASE("an opaque operator that writes its argument (a!) blocks cse of the value it writes") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = aten::clone(%x, None)\n"
      "  %a : Tensor = aten::relu(%y)\n"
      "  %w : Tensor = ptopt_test::opaque_scale_(%y, 2.0)\n"
      "  %b : Tensor = aten::relu(%y)\n"
      "  %t : Tensor = aten::add.Tensor(%a, %b, 1)\n"
      "  output(%t)\n");
  auto r = test::runPipeline(*g, "cse");
  CHECK(test::counter(r, "cse", "eliminated") == 0);
  CHECK(test::countOps(*g, "aten::relu") == 2);
}

TEST_CASE("alias annotations are trusted only for operators registered from their schema") {
  // opaque_scale (FROM_SCHEMA, unannotated) does not write %y: the relus
  // merge. conservative_touch (CONSERVATIVE) may write it: they do not.
  auto build = [](const std::string& op) {
    return ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = aten::clone(%x, None)\n"
        "  %a : Tensor = aten::relu(%y)\n"
        "  %w : Tensor = " + op + "\n"
        "  %b : Tensor = aten::relu(%y)\n"
        "  %ab : Tensor = aten::add.Tensor(%a, %b, 1)\n"
        "  %t : Tensor = aten::mul.Tensor(%ab, %w)\n"
        "  output(%t)\n");
  };
  auto fromSchema = build("ptopt_test::opaque_scale(%y, 2.0)");
  CHECK(!ir::opaqueMayWriteAll(findCall(*fromSchema, "ptopt_test::opaque_scale")));
  CHECK(test::counter(test::runPipeline(*fromSchema, "cse"), "cse", "eliminated") == 1);

  auto conservative = build("ptopt_test::conservative_touch(%y)");
  CHECK(ir::opaqueMayWriteAll(findCall(*conservative, "ptopt_test::conservative_touch")));
  CHECK(test::counter(test::runPipeline(*conservative, "cse"), "cse", "eliminated") == 0);
}

TEST_CASE("Preset -O1 and the generic passes keep opaque calls exactly, in place") {
  ir::ParseOptions opts;
  opts.constants = std::make_shared<ir::ConstantTable>();
  opts.constants->set("w", torch::ones({4}));
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %a : Tensor = aten::mul.Tensor(%x, %w)\n"
      "  %b : Tensor = ptopt_test::opaque_scale(%a, 2.0)\n"
      "  %c : Tensor = ptopt_test::opaque_scale(%a, 2.0)\n"
      "  %d : Tensor = ptopt_test::opaque_scale_(%c, 0.5)\n"
      "  %n : int = ptopt_test::opaque_count(1)\n"
      "  %e : Tensor = aten::add.Tensor(%b, %d, %n)\n"
      "  output(%e)\n",
      opts);
  const auto before = linesCalling(*g, "ptopt_test::");
  REQUIRE(before.size() == 4);
  const at::Tensor x = torch::randn({4});
  const at::Tensor expected = test::runGraph(*g, {x}).toTensor();
  for (const std::string pipeline :
       {"-O1", "canonicalize,const-fold,fixpoint{max-iter=4}(cse,dce)", "functionalize,cse,dce"}) {
    INFO(pipeline);
    auto copy = ir::cloneGraph(*g);
    test::runPipeline(*copy, pipeline);
    ir::lintOrThrow(*copy, "after " + std::string(pipeline));
    CHECK(linesCalling(*copy, "ptopt_test::") == before);
    CHECK(torch::equal(test::runGraph(*copy, {x}).toTensor(), expected));
  }
}

// Copies a TorchScript archive, renaming operator `from` to `to` (same
// length, so the debug info's source ranges stay right) in its code.
void renameOperatorInArchive(const std::string& in, const std::string& out, const std::string& from,
                             const std::string& to) {
  REQUIRE(from.size() == to.size());
  caffe2::serialize::PyTorchStreamReader reader(in);
  caffe2::serialize::PyTorchStreamWriter writer(out);
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;  // the writer adds its own
    auto [data, size] = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(data.get()), size);
    if (name.rfind("code/", 0) == 0)
      for (size_t at = bytes.find(from); at != std::string::npos; at = bytes.find(from, at)) bytes.replace(at, from.size(), to);
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
}

TEST_CASE("a model calling an operator nobody registered fails to load: names it, suggests --load-ops") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = ptopt_test::opaque_scale(%x, 2.0)\n"
      "  output(%y)\n");
  TempFile registered("registered"), unregistered("unregistered");
  ir::exportModel(modelOf(std::move(g))).save(registered.path);
  renameOperatorInArchive(registered.path, unregistered.path, "opaque_scale", "opaque_xxxxx");
  try {
    ir::loadTorchScript(unregistered.path);
    FAIL("loading succeeded");
  } catch (const ir::InputError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg, Catch::Contains("ptopt_test::opaque_xxxxx"));
    CHECK_THAT(msg, Catch::Contains("--load-ops"));
  }
}

TEST_CASE("loadOperatorLibrary reports the loader's message for a library it cannot load") {
  try {
    loadOperatorLibrary("/nonexistent/libmissing_ops.so");
    FAIL("loading succeeded");
  } catch (const ir::InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/nonexistent/libmissing_ops.so"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("No such file"));
  }
}

TEST_CASE("torchvision's ops library loads without Python and registers torchvision::nms") {
  const std::string lib = findTorchvisionOpsLibrary();
  if (lib.empty()) {
    WARN("skipped: python3-torchvision's C++ ops library is not installed");
    return;
  }
  const auto added = loadOperatorLibrary(lib);
  CHECK(std::find(added.begin(), added.end(), "torchvision::nms") != added.end());
  CHECK(ir::findSchema("torchvision::roi_align", "") != nullptr);
  // A second load is harmless.
  CHECK_NOTHROW(loadOperatorLibrary(lib));
}
