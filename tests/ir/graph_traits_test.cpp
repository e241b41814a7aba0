// Boost.Graph over the IR: concepts, edges through nested blocks, topo order.
#include "ir/graph_traits.h"
#include "ir/lint.h"
#include "ir/text.h"

#include <boost/graph/graph_concepts.hpp>
#include <catch2/catch.hpp>

#include <algorithm>

using namespace ptopt::ir;

BOOST_CONCEPT_ASSERT((boost::VertexListGraphConcept<Block>));
BOOST_CONCEPT_ASSERT((boost::IncidenceGraphConcept<Block>));

namespace {
const char* kGraph =
    "graph(%x : Tensor, %c : bool):\n"
    "  %a : Tensor = aten::relu(%x)\n"
    "  %b : Tensor = aten::sigmoid(%x)\n"
    "  %r : Tensor = prim::If(%c)\n"
    "    block0():\n"
    "      %inner : Tensor = aten::mul.Tensor(%a, %b)\n"
    "      output(%inner)\n"
    "    block1():\n"
    "      output(%a)\n"
    "  %s : Tensor = aten::add.Tensor(%r, %b, 1)\n"
    "  output(%s)\n";

size_t position(const std::vector<Node*>& order, const Node* n) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), n) - order.begin());
}
}  // namespace

TEST_CASE("out-edges attribute nested uses to the enclosing node") {
  auto g = parseGraph(kGraph);
  Node* relu = g->findValue("a")->node();
  Node* ifNode = g->findValue("r")->node();
  std::vector<Node*> targets;
  auto [first, last] = out_edges(relu, *g->block());
  for (auto it = first; it != last; ++it) targets.push_back(target(*it, *g->block()));
  // relu's output is used inside both branches: two edges to the If.
  CHECK(targets == std::vector<Node*>{ifNode, ifNode});
  CHECK(num_vertices(*g->block()) == g->block()->size());
}

TEST_CASE("topologicalOrder respects data dependencies even when the list order does not") {
  auto g = parseGraph(kGraph);
  Node* add = g->findValue("s")->node();
  Node* sigmoid = g->findValue("b")->node();
  Node* ifNode = g->findValue("r")->node();
  // Scramble: put sigmoid right before the output node.
  sigmoid->moveBefore(g->block()->outputNode());
  auto order = topologicalOrder(*g->block());
  REQUIRE(order.size() == g->block()->size());
  CHECK(position(order, sigmoid) < position(order, ifNode));
  CHECK(position(order, sigmoid) < position(order, add));
  CHECK(position(order, ifNode) < position(order, add));
}
