// Interpreter: bitwise equality with TorchScript on fixtures, control flow,
// hand-written prims, errors, observers, constant protection.
#include "ir/interpreter.h"
#include "ir/text.h"
#include "tests/support/fixtures.h"
#include "verify/inputs.h"

#include <catch2/catch.hpp>
#include <torch/torch.h>

using namespace ptopt;

namespace {

// Bitwise equality of two IValues (tensors: same dtype, shape and bits).
bool bitwiseEqual(const c10::IValue& a, const c10::IValue& b) {
  if (a.isTensor() && b.isTensor()) {
    const at::Tensor& x = a.toTensor();
    const at::Tensor& y = b.toTensor();
    return x.scalar_type() == y.scalar_type() && x.sizes() == y.sizes() && torch::equal(x, y);
  }
  if (a.isTuple() && b.isTuple()) {
    const auto& xs = a.toTupleRef().elements();
    const auto& ys = b.toTupleRef().elements();
    if (xs.size() != ys.size()) return false;
    for (size_t i = 0; i < xs.size(); ++i)
      if (!bitwiseEqual(xs[i], ys[i])) return false;
    return true;
  }
  if (a.isList() && b.isList()) {
    auto xs = a.toList();
    auto ys = b.toList();
    if (xs.size() != ys.size()) return false;
    for (size_t i = 0; i < xs.size(); ++i)
      if (!bitwiseEqual(xs.get(i), ys.get(i))) return false;
    return true;
  }
  return a == b;
}

std::shared_ptr<ir::ConstantTable> tableWith(const std::string& name, const at::Tensor& t) {
  auto table = std::make_shared<ir::ConstantTable>();
  table->set(name, t);
  return table;
}

}  // namespace

TEST_CASE("interpreter reproduces fixture outputs bitwise") {
  for (const char* name : {"resnet18_script", "control_flow", "embedding_int64", "inplace_ops"}) {
    DYNAMIC_SECTION(name) {
      const auto& f = test::fixture(name);
      torch::jit::Module original;
      ir::Model model = test::importFixture(f, &original);
      for (uint64_t seed : {0, 1}) {
        const auto inputs = verify::makeInputs(f.inputs, seed);
        c10::IValue expected = test::runForward(original, inputs);
        ir::Interpreter interp(model.forward());
        c10::IValue got = interp.runMethod(verify::cloneInputs(inputs));
        CHECK(bitwiseEqual(got, expected));
      }
    }
  }
}

TEST_CASE("interpreter runs loops with trip count condition and carried values") {
  // Sums i for i < n while the sum stays below a limit; returns (sum, count).
  auto g = ir::parseGraph(
      "graph(%n : int, %limit : int):\n"
      "  %c0 : bool = aten::lt.int(0, %limit)\n"
      "  %s : int, %k : int = prim::Loop(%n, %c0, 0, 0)\n"
      "    block0(%i : int, %acc : int, %cnt : int):\n"
      "      %acc2 : int = aten::add.int(%acc, %i)\n"
      "      %cnt2 : int = aten::add.int(%cnt, 1)\n"
      "      %go : bool = aten::lt.int(%acc2, %limit)\n"
      "      output(%go, %acc2, %cnt2)\n"
      "  output(%s, %k)\n");
  ir::Interpreter interp(*g);
  auto outs = interp.run({int64_t{5}, int64_t{100}});
  CHECK(outs.at(0).toInt() == 10);  // 0+1+2+3+4
  CHECK(outs.at(1).toInt() == 5);
  outs = interp.run({int64_t{5}, int64_t{4}});  // stops once the sum reaches 4 (0+1+2+3 = 6)
  CHECK(outs.at(0).toInt() == 6);
  CHECK(outs.at(1).toInt() == 4);
  outs = interp.run({int64_t{5}, int64_t{0}});  // initial condition false: body never runs
  CHECK(outs.at(0).toInt() == 0);
  CHECK(outs.at(1).toInt() == 0);
}

TEST_CASE("interpreter runs if branches and tensor ops") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %c : bool):\n"
      "  %r : Tensor = prim::If(%c)\n"
      "    block0():\n"
      "      %a : Tensor = aten::relu(%x)\n"
      "      output(%a)\n"
      "    block1():\n"
      "      %b : Tensor = aten::neg(%x)\n"
      "      output(%b)\n"
      "  output(%r)\n");
  at::Tensor x = torch::tensor({-1.0f, 2.0f});
  ir::Interpreter interp(*g);
  CHECK(torch::equal(interp.run({x, true}).at(0).toTensor(), torch::tensor({0.0f, 2.0f})));
  CHECK(torch::equal(interp.run({x, false}).at(0).toTensor(), torch::tensor({1.0f, -2.0f})));
}

TEST_CASE("interpreter runs container prims") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %l : List[int] = prim::ListConstruct(%n, 2, 3)\n"
      "  %a : int, %b : int, %c : int = prim::ListUnpack(%l)\n"
      "  %t : Tuple[int, Tensor] = prim::TupleConstruct(%c, %x)\n"
      "  %u : int, %v : Tensor = prim::TupleUnpack(%t)\n"
      "  %w : Tensor = prim::TupleIndex(%t, -1)\n"
      "  %d : Dict[str, int] = prim::DictConstruct(\"a\", %a, \"b\", %b)\n"
      "  %db : int = aten::__getitem__.Dict_str(%d, \"b\")\n"
      "  %y : Tensor = aten::view(%w, %l)\n"
      "  %z : bool = prim::isinstance[types=types(List[int])](%l)\n"
      "  %o : Optional[int] = prim::unchecked_cast(%u)\n"
      "  %s : str = aten::format(\"{}-{}\", %a, %b)\n"
      "  output(%a, %db, %u, %y, %z, %o, %s)\n");
  ir::Interpreter interp(*g);
  auto outs = interp.run({torch::arange(24), int64_t{4}});
  CHECK(outs.at(0).toInt() == 4);
  CHECK(outs.at(1).toInt() == 2);
  CHECK(outs.at(2).toInt() == 3);
  CHECK(outs.at(3).toTensor().sizes() == at::IntArrayRef({4, 2, 3}));
  CHECK(outs.at(4).toBool());
  CHECK(outs.at(5).toInt() == 3);
  CHECK(outs.at(6).toStringRef() == "4-2");  // a vararg operator
}

TEST_CASE("interpreter fills schema defaults for missing trailing arguments") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %s : Tensor = aten::sum(%x, None)\n"
      "  %y : Tensor = aten::add.Tensor(%x, %s)\n"
      "  output(%y)\n");
  auto outs = ir::Interpreter(*g).run({torch::ones({3})});
  CHECK(torch::equal(outs.at(0).toTensor(), torch::full({3}, 4.0f)));
}

TEST_CASE("interpreter errors name the node") {
  SECTION("raise") {
    auto g = ir::parseGraph(
        "graph(%c : bool):\n"
        "  prim::If(%c)\n"
        "    block0():\n"
        "      prim::RaiseException(\"boom\", \"builtins.ValueError\")\n"
        "      output()\n"
        "    block1():\n"
        "      output()\n"
        "  output(%c)\n");
    ir::Interpreter interp(*g);
    CHECK(interp.run({false}).at(0).toBool() == false);
    CHECK_THROWS_WITH(interp.run({true}), Catch::Contains("boom") && Catch::Contains("ValueError"));
  }
  SECTION("unknown operator") {
    ir::ParseOptions opts;
    opts.requireKnownOperators = false;
    auto g = ir::parseGraph(
        "graph(%x : Tensor):\n"
        "  %y : Tensor = ptopt_test::no_such_op(%x)\n"
        "  output(%y)\n",
        opts);
    CHECK_THROWS_WITH(ir::Interpreter(*g).run({torch::ones({2})}),
                      Catch::Contains("ptopt_test::no_such_op"));
  }
  SECTION("operator failure") {
    auto g = ir::parseGraph(
        "graph(%x : Tensor, %y : Tensor):\n"
        "  %z : Tensor = aten::mm(%x, %y)\n"
        "  output(%z)\n");
    CHECK_THROWS_AS(ir::Interpreter(*g).run({torch::ones({2, 3}), torch::ones({2, 3})}),
                    ir::InterpreterError);
    CHECK_THROWS_WITH(ir::Interpreter(*g).run({torch::ones({2, 3}), torch::ones({2, 3})}),
                      Catch::Contains("aten::mm"));
  }
  SECTION("wrong number of inputs") {
    auto g = ir::parseGraph("graph(%x : Tensor):\n  output(%x)\n");
    CHECK_THROWS_AS(ir::Interpreter(*g).run({}), ir::InterpreterError);
  }
}

TEST_CASE("interpreter observer sees every value and the last loop iteration") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %n : int):\n"
      "  %r : Tensor = prim::Loop(%n, True, %x)\n"
      "    block0(%i : int, %h : Tensor):\n"
      "      %l : List[Tensor] = prim::ListConstruct(%h, %h)\n"
      "      %h2 : Tensor = aten::cat(%l, 0)\n"
      "      output(True, %h2)\n"
      "  output(%r)\n");
  std::map<std::string, std::vector<int64_t>> shapes;
  ir::InterpreterOptions opts;
  opts.observer = [&](const ir::Value& v, const c10::IValue& iv) {
    if (iv.isTensor()) shapes[v.name()] = iv.toTensor().sizes().vec();
  };
  ir::Interpreter(*g, opts).run({torch::ones({1, 2}), int64_t{3}});
  CHECK(shapes.at("x") == std::vector<int64_t>{1, 2});
  CHECK(shapes.at("h") == std::vector<int64_t>{4, 2});   // last iteration's input
  CHECK(shapes.at("h2") == std::vector<int64_t>{8, 2});  // last iteration's result
  CHECK(shapes.at("r") == std::vector<int64_t>{8, 2});
}

TEST_CASE("interpreter never changes constants the graph writes in place") {
  const at::Tensor w = torch::ones({2});
  ir::ParseOptions opts;
  opts.constants = tableWith("w", w.clone());
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %w : Tensor = get_attr[\"w\"]\n"
      "  %v : Tensor = aten::view(%w, [2])\n"
      "  %a : Tensor = aten::add_.Tensor(%v, %x, 1)\n"
      "  output(%a)\n",
      opts);
  ir::MutationAnalysis mutation(*g);
  CHECK(mutation.writtenConstants() == std::set<std::string>{"w"});
  ir::Interpreter interp(*g);
  for (int i = 0; i < 2; ++i)
    CHECK(torch::equal(interp.run({torch::ones({2})}).at(0).toTensor(), torch::full({2}, 2.0f)));
  CHECK(torch::equal(g->constants().tensor("w"), w));
}

TEST_CASE("mutation analysis follows aliases and containers") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor, %y : Tensor):\n"
      "  %a : Tensor = aten::relu(%x)\n"
      "  %l : List[Tensor] = prim::ListConstruct(%a)\n"
      "  %e : Tensor = aten::__getitem__.t(%l, 0)\n"
      "  %r : Tensor = aten::relu_(%e)\n"
      "  %b : Tensor = aten::sigmoid(%y)\n"
      "  output(%r, %b)\n");
  ir::MutationAnalysis mutation(*g);
  CHECK(mutation.mayBeWritten(g->findValue("a")));
  CHECK(mutation.mayBeWritten(g->findValue("l")));
  CHECK_FALSE(mutation.mayBeWritten(g->findValue("x")));  // relu copies
  CHECK_FALSE(mutation.mayBeWritten(g->findValue("b")));
}

TEST_CASE("interpreter evaluates single nodes") {
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %y : Tensor = aten::mul.Scalar(%x, 3)\n"
      "  %n : int = aten::add.int(2, 5)\n"
      "  output(%y, %n)\n");
  const ir::Node* mul = g->findValue("y")->node();
  auto out = ir::Interpreter::evaluateNode(*mul, {torch::ones({2}), ir::Interpreter::argumentValue(mul->arg(1).literal())});
  CHECK(torch::equal(out.at(0).toTensor(), torch::full({2}, 3.0f)));
  const ir::Node* add = g->findValue("n")->node();
  CHECK(ir::Interpreter::evaluateNode(*add, {int64_t{2}, int64_t{5}}).at(0).toInt() == 7);
  CHECK_THROWS_AS(ir::Interpreter::evaluateNode(*add, {int64_t{2}}), ir::InterpreterError);
}

TEST_CASE("metaOf detects memory formats") {
  at::Tensor x = torch::randn({1, 3, 4, 4});
  auto m = ir::metaOf(x);
  CHECK(m.dtype == c10::ScalarType::Float);
  CHECK(m.shape == std::vector<int64_t>{1, 3, 4, 4});
  CHECK(m.memoryFormat == c10::MemoryFormat::Contiguous);
  CHECK(m.device == c10::Device(c10::kCPU));
  CHECK(ir::metaOf(x.contiguous(at::MemoryFormat::ChannelsLast)).memoryFormat == c10::MemoryFormat::ChannelsLast);
  CHECK(ir::metaOf(torch::randn({1, 2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast3d)).memoryFormat ==
        c10::MemoryFormat::ChannelsLast3d);
  CHECK_FALSE(ir::metaOf(torch::randn({4, 4}).t()).memoryFormat.has_value());
  // An undefined tensor (an output ATen did not compute) has no metadata.
  CHECK(ir::metaOf(at::Tensor()).empty());
}

TEST_CASE("interpreter runs operators TorchScript creates per node") {
  // prim::ConstantChunk has no fixed schema: its Operation is made from a
  // TorchScript node carrying the chunks/dim attributes.
  auto g = ir::parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor, %b : Tensor = prim::ConstantChunk[chunks=2, dim=1](%x)\n"
      "  output(%a, %b)\n");
  at::Tensor x = torch::arange(8).view({2, 4});
  auto outs = ir::Interpreter(*g).run({x});
  CHECK(torch::equal(outs.at(0).toTensor(), x.slice(1, 0, 2)));
  CHECK(torch::equal(outs.at(1).toTensor(), x.slice(1, 2, 4)));
}
