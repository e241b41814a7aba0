// IR unit tests: build, mutate, names, clone.
#include "ir/ir.h"
#include "ir/lint.h"
#include "ir/text.h"

#include <catch2/catch.hpp>

using namespace ptopt::ir;

namespace {
c10::TypePtr tensorT() { return c10::TensorType::get(); }
}  // namespace

TEST_CASE("build a graph with calls and literals and outputs") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Value* y = g.addInput(tensorT(), "y");
  Builder b(g.block());
  Value* sum = b.call("aten::add.Tensor", {x, y, 1});
  Value* r = b.call("aten::relu", {sum});
  g.block()->outputNode()->addArg(r);

  CHECK(lint(g).empty());
  CHECK(g.inputs() == std::vector<Value*>{x, y});
  CHECK(g.outputs() == std::vector<Value*>{r});
  CHECK(sum->node()->schema() != nullptr);
  CHECK(sum->node()->schema()->overload_name() == "Tensor");
  CHECK(sum->node()->argIndex("alpha") == std::optional<size_t>(2));
  CHECK(x->uses().size() == 1);
  CHECK(sum->uses() == std::vector<Use>{{r->node(), 0}});
  CHECK(g.str() ==
        "graph(%x : Tensor, %y : Tensor):\n"
        "  %0 : Tensor = aten::add.Tensor(%x, %y, 1)\n"
        "  %1 : Tensor = aten::relu(%0)\n"
        "  output(%1)\n");
}

TEST_CASE("replaceAllUsesWith moves every use and keeps use lists right") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Builder b(g.block());
  Value* a = b.call("aten::relu", {x});
  Value* c = b.call("aten::mul.Tensor", {a, a});
  g.block()->outputNode()->addArg(c);
  Value* t = Builder(a->node()).call("aten::tanh", {x});
  a->replaceAllUsesWith(t);
  CHECK_FALSE(a->hasUses());
  CHECK(t->uses().size() == 2);
  CHECK(c->node()->argValue(0) == t);
  a->node()->destroy();
  CHECK(lint(g).empty());
  CHECK(g.numNodes() == 4);  // placeholder, tanh, mul, output
}

TEST_CASE("destroy refuses a node whose outputs are used") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Value* a = Builder(g.block()).call("aten::relu", {x});
  g.block()->outputNode()->addArg(a);
  CHECK_THROWS_WITH(a->node()->destroy(), Catch::Contains("still has uses"));
}

TEST_CASE("removeArg renumbers the uses of later arguments") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Value* y = g.addInput(tensorT(), "y");
  Node* n = Builder(g.block()).callNode("prim::ListConstruct", {x, y, x}, {c10::ListType::ofTensors()});
  g.block()->outputNode()->addArg(n->output());
  n->removeArg(0);
  CHECK(x->uses() == std::vector<Use>{{n, 1}});
  CHECK(y->uses() == std::vector<Use>{{n, 0}});
  CHECK(lint(g).empty());
}

TEST_CASE("insertion points: Builder before a node and moveBefore and isBefore") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Builder atEnd(g.block());
  Value* a = atEnd.call("aten::relu", {x});
  Value* c = atEnd.call("aten::sigmoid", {a});
  g.block()->outputNode()->addArg(c);
  Value* mid = Builder(c->node()).call("aten::neg", {a});
  CHECK(a->node()->isBefore(mid->node()));
  CHECK(mid->node()->isBefore(c->node()));
  CHECK(mid->node()->next() == c->node());
  mid->node()->moveAfter(c->node());
  CHECK(c->node()->next() == mid->node());
  CHECK(g.block()->last()->opcode() == Opcode::Output);
}

TEST_CASE("value names stay unique") {
  Graph g;
  Value* a = g.addInput(tensorT(), "x");
  Value* b = g.addInput(tensorT(), "x");
  Value* c = g.addInput(tensorT(), "x.1");
  CHECK(a->name() == "x");
  CHECK(b->name() != "x");
  CHECK(c->name() != b->name());
  CHECK(g.findValue(b->name()) == b);
  Value* weird = g.addInput(tensorT(), "a-b c");
  CHECK(weird->name() == "a_b_c");
}

TEST_CASE("nested blocks: params and outputs and walk and destroy") {
  Graph g;
  Value* x = g.addInput(tensorT(), "x");
  Value* n = g.addInput(c10::IntType::get(), "n");
  Node* loop = Builder(g.block()).callNode("prim::Loop", {n, true, x}, {tensorT()});
  Block* body = loop->addBlock();
  body->addParam(c10::IntType::get(), "i");
  Value* carried = body->addParam(tensorT(), "h");
  Value* next = Builder(body).call("aten::relu", {carried});
  body->outputNode()->addArg(true);
  body->outputNode()->addArg(next);
  g.block()->outputNode()->addArg(loop->output());
  CHECK(lint(g).empty());
  size_t count = 0;
  g.walk([&](Node*) { ++count; });
  CHECK(count == 6);  // 2 placeholders, loop, relu, body output, graph output
  CHECK(next->node()->ancestorIn(g.block()) == loop);
  g.block()->outputNode()->setArg(0, x);
  loop->destroy();
  CHECK(lint(g).empty());
  CHECK(g.findValue("h") == nullptr);
}

TEST_CASE("cloneGraph gives the same text and independent nodes") {
  auto g = parseGraph(
      "graph(%x : Tensor):\n"
      "  %a : Tensor{float32, [2, 3], contiguous_format, cpu} = aten::relu(%x)\n"
      "  output(%a)\n");
  auto copy = cloneGraph(*g);
  CHECK(copy->str() == g->str());
  copy->block()->outputNode()->setArg(0, copy->inputs()[0]);
  CHECK(copy->str() != g->str());
}
